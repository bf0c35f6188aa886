package launch

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
)

// rolesBuffer is what a roles-mode kernel leaves in the trace buffer for c:
// timing records in full, role records with their two times alone, in
// cycles of an SM clock running at half a nanosecond a cycle (a quarter on
// odd SMs), started at a different moment on each; each timing record's start read
// together with consumer 0's next stamp, as the kernel reads them. want is
// each record as PlaceRoles must finish it.
func rolesBuffer(t *testing.T, c *kernels.Config, stamp func(k int) (uint64, uint64)) (raw []byte, want []*instrument.Record) {
	return rolesBufferClocked(t, c, stamp, func(sm int) float64 { return map[bool]float64{false: 0.5, true: 0.25}[sm%2 == 1] }, 37_000, 1)
}

// rolesBufferClocked is rolesBuffer with each SM's clock rate (ns a
// cycle), the cycles between a block's two anchors, and the step of
// %globaltimer (the kernel's readings of it are floored to a multiple).
func rolesBufferClocked(t *testing.T, c *kernels.Config, stamp func(k int) (uint64, uint64), rateOf func(sm int) float64, span, step uint64) (raw []byte, want []*instrument.Record) {
	t.Helper()
	h := c.Header(instrument.SourceGPU, "")
	sched := kernels.Schedule(c)
	raw = make([]byte, 56*len(sched))
	var block []int // the records of the block being filled
	flush := func(sm int) {
		g0, c0 := 1_000_000+uint64(sm)*977, 50_000+uint64(sm)*64
		rate := rateOf(sm)
		truth := func(cycles uint64) uint64 {
			return uint64(int64(g0) + int64(math.Round(float64(int64(cycles-c0))*rate)))
		}
		timer := func(cycles uint64) uint64 { return truth(cycles) / step * step } // what %globaltimer read
		cycles := map[int][2]uint64{}
		anchors := 0
		for _, k := range block {
			s := sched[k]
			switch {
			case s.Event == instrument.EventClock:
				cycles[k] = [2]uint64{c0 + uint64(anchors)*span, 0}
				anchors++
			case s.Kind == instrument.KindRole:
				a, b := stamp(k)
				// Multiples of 4 from c0, before the first anchor too: the producer starts first.
				a, b = c0-500+(a%(span+1000))&^3, c0-500+(b%(span+1000))&^3
				cycles[k] = [2]uint64{min(a, b), max(a, b)}
			}
		}
		for x, k := range block {
			s := sched[k]
			r := s.Record()
			r.SM = sm
			off := raw[56*k:]
			switch {
			case s.Kind == instrument.KindTiming:
				// Consumer 0's first span of the step: wait_k, or the epilogue.
				next := block[x+1]
				for sched[next].Role != instrument.RoleConsumer0 || (sched[next].Event != instrument.EventWaitK && sched[next].Event != instrument.EventEpilogue) {
					next++
				}
				r.TStart = timer(cycles[next][0])
				r.TEnd = r.TStart + 5
				if err := instrument.PutRecordHeader(off, &h, r); err != nil {
					t.Fatal(err)
				}
			case s.Event == instrument.EventClock:
				cy := cycles[k][0]
				binary.LittleEndian.PutUint64(off[40:], timer(cy))
				binary.LittleEndian.PutUint64(off[48:], cy)
				r.TStart, r.TEnd = timer(cy), timer(cy)
			default:
				binary.LittleEndian.PutUint64(off[40:], cycles[k][0])
				binary.LittleEndian.PutUint64(off[48:], cycles[k][1])
				r.TStart, r.TEnd = truth(cycles[k][0]), truth(cycles[k][1])
			}
			want = append(want, r)
		}
		block = block[:0]
	}
	for k, s := range sched {
		if k > 0 && (s.BH != sched[k-1].BH || s.I != sched[k-1].I) {
			flush(sched[k-1].BH*7 + sched[k-1].I)
		}
		block = append(block, k)
	}
	flush(sched[len(sched)-1].BH*7 + sched[len(sched)-1].I)
	return raw, want
}

// PlaceRoles finishes every role record: its header from the schedule,
// the block's SM from its timing records, its cycles placed on the
// %globaltimer axis through the block's two anchors; the result decodes
// as a trace. A record never stamped or anchors without a rate fail.
func TestPlaceRoles(t *testing.T) {
	rng := testrand.New(t)
	for _, v := range []instrument.Variant{instrument.VariantFlash3WS, instrument.VariantFlash3PingPong} {
		c := kernels.Config{Variant: v, N: 128 + rng.IntN(400), D: 64, Br: 128, Bc: 128, Batch: 1, Heads: 2,
			Causal: rng.IntN(2) == 0, Pattern: instrument.PatternNormal, Timing: true, Roles: true}
		run, err := c.Check()
		if err != nil {
			t.Fatal(err)
		}
		plan, err := ForTrace(run)
		if err != nil {
			t.Fatal(err)
		}
		stamps := make([][2]uint64, len(kernels.Schedule(&c)))
		for k := range stamps {
			stamps[k] = [2]uint64{1 + rng.Uint64N(1<<40), 1 + rng.Uint64N(1<<40)}
		}
		raw, want := rolesBuffer(t, &c, func(k int) (uint64, uint64) { return stamps[k][0], stamps[k][1] })
		if int(plan.TraceBytes) != len(raw) {
			t.Fatalf("%s: the plan lays out %d bytes, the schedule %d", v, plan.TraceBytes, len(raw))
		}
		good := bytes.Clone(raw)
		if err := PlaceRoles(&c, good); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		h := c.Header(instrument.SourceGPU, "")
		trace, err := instrument.AppendHeader(nil, &h)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := instrument.ReadAll(bytes.NewReader(append(trace, good...)))
		if err != nil {
			t.Fatalf("%s: the placed trace does not decode: %v", v, err)
		}
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Fatalf("%s record %d: %+v, want %+v", v, k, *got[k], *want[k])
			}
		}

		// A role record the kernel never stamped.
		for k, s := range kernels.Schedule(&c) {
			if s.Kind == instrument.KindRole && s.Event != instrument.EventClock && rng.IntN(4) == 0 {
				bad := bytes.Clone(raw)
				clear(bad[56*k+40 : 56*k+56])
				if err := PlaceRoles(&c, bad); err == nil || !strings.Contains(err.Error(), "never stamped") {
					t.Fatalf("%s: record %d unstamped: %v", v, k, err)
				}
				break
			}
		}
		// Anchors that give no rate: the end anchor's cycles before the start's.
		for k, s := range kernels.Schedule(&c) {
			if s.Event == instrument.EventClock {
				bad := bytes.Clone(raw)
				binary.LittleEndian.PutUint64(bad[56*k+48:], math.MaxUint64)
				if err := PlaceRoles(&c, bad); err == nil || !strings.Contains(err.Error(), "no rate") {
					t.Fatalf("%s: a start anchor after the end one: %v", v, err)
				}
				break
			}
		}
	}
}

// Short blocks (anchors 4 µs apart) take the run's clock rate, and with
// %globaltimer read in 256-ns steps every span still lands within a step
// of where its cycles put it.
func TestPlaceRolesShortBlocksCoarseTimer(t *testing.T) {
	rng := testrand.New(t)
	c := kernels.Config{Variant: instrument.VariantFlash3PingPong, N: 128 + rng.IntN(400), D: 64, Br: 128, Bc: 128, Batch: 1, Heads: 3,
		Causal: true, Pattern: instrument.PatternNormal, Timing: true, Roles: true}
	sched := kernels.Schedule(&c)
	stamps := make([][2]uint64, len(sched))
	for k := range stamps {
		stamps[k] = [2]uint64{1 + rng.Uint64N(1<<40), 1 + rng.Uint64N(1<<40)}
	}
	raw, want := rolesBufferClocked(t, &c, func(k int) (uint64, uint64) { return stamps[k][0], stamps[k][1] },
		func(int) float64 { return 0.5 }, 8_000, 256)
	if err := PlaceRoles(&c, raw); err != nil {
		t.Fatal(err)
	}
	h := c.Header(instrument.SourceGPU, "")
	trace, _ := instrument.AppendHeader(nil, &h)
	_, got, err := instrument.ReadAll(bytes.NewReader(append(trace, raw...)))
	if err != nil {
		t.Fatal(err)
	}
	worst := int64(0)
	for k, s := range sched {
		if s.Kind != instrument.KindRole || s.Event == instrument.EventClock {
			continue
		}
		for _, d := range []int64{int64(got[k].TStart - want[k].TStart), int64(got[k].TEnd - want[k].TEnd)} {
			worst = max(worst, d, -d)
		}
	}
	if worst > 256 {
		t.Fatalf("a span placed %d ns from its true time, over one 256-ns step of the timer", worst)
	}
	t.Logf("worst placement error %d ns", worst)
}
