package kernels

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

func TestParseConfigErrorsNameFieldAndLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		query, field, mentions string
	}{
		{"n=0", FieldN, "between 1 and 4096"},
		{"n=5000", FieldN, "4096"},
		{"n=abc", FieldN, "whole number"},
		{"d=257", FieldD, "256"},
		{"br=0", FieldBr, "between 1 and 256"},
		{"batch=17", FieldBatch, "16"},
		{"heads=0", FieldHeads, "between 1 and 64"},
		{"causal=maybe", FieldCausal, "0 or 1"},
		{"pattern=spiky", FieldPattern, "normal, peaked, large"},
		{"variant=flash3", FieldVariant, strings.Join(variantNames(), ", ")}, // every rung, from the registry
		{"seed=-1", FieldSeed, "whole number"},
		{"trace_bh=2-1", FieldTraceBH, "first-last"},
		{"heads=2&trace_bh=0-5", FieldTraceBH, "within 0-1"},
		{"trace_q=9", FieldTraceQ, "within 0-3"},
		{"n=4096&d=256&br=64&bc=64", FieldTraceBH, "32.0 MiB limit"},
		{"mode=fast", FieldMode, "full, timing or roles"},
		{"mode=roles", FieldMode, "flash3_ws or flash3_pingpong"},
		{"variant=flash3_ws&n=256&br=128&bc=128&mode=roles&trace_q=1", FieldMode, "every block"},
		{"mode=timing&trace_q=1", FieldMode, "every block"},
		{"engine=tpu", FieldEngine, "auto, gpu or cpu"},
	}
	for _, tc := range cases {
		v, _ := url.ParseQuery(tc.query)
		_, err := ParseConfig(v)
		var fe FieldErrors
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v is not FieldErrors", tc.query, err)
			continue
		}
		msg, ok := fe.ByField()[tc.field]
		if !ok || !strings.Contains(msg, tc.mentions) {
			t.Errorf("%s: errors %v, want field %q mentioning %q", tc.query, fe, tc.field, tc.mentions)
		}
	}
}

func TestParseConfigReportsEveryBadField(t *testing.T) {
	t.Parallel()
	v, _ := url.ParseQuery("n=x&d=0&pattern=z&causal=2")
	_, err := ParseConfig(v)
	var fe FieldErrors
	if !errors.As(err, &fe) {
		t.Fatal(err)
	}
	for _, f := range []string{FieldN, FieldD, FieldPattern, FieldCausal} {
		if _, ok := fe.ByField()[f]; !ok {
			t.Errorf("no error for %s in %v", f, fe)
		}
	}
}

// mustRun is c as a Run, failing the test when c is not valid.
func mustRun(t testing.TB, c Config) Run {
	t.Helper()
	r, err := c.Check()
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	return r
}

// An invalid configuration cannot become a Run; a parsed one is the run its
// query names.
func TestRunOnlyFromValidConfig(t *testing.T) {
	t.Parallel()
	bad := DefaultConfig()
	bad.N, bad.Br = 5000, 0
	r, err := bad.Check()
	var fe FieldErrors
	if !errors.As(err, &fe) || fe.ByField()[FieldN] == "" || fe.ByField()[FieldBr] == "" {
		t.Fatalf("Check of %+v: error %v, want FieldErrors naming n and br", bad, err)
	}
	if r != (Run{}) {
		t.Fatalf("Check of an invalid config returned %+v, want the zero Run", r)
	}
	if r, err := ParseRun(url.Values{FieldN: {"0"}}); err == nil || r != (Run{}) {
		t.Fatalf("ParseRun(n=0) = %+v, %v: want the zero Run and an error", r, err)
	} else if !errors.As(err, &fe) || fe.ByField()[FieldN] == "" {
		t.Fatalf("ParseRun(n=0): error %v is not FieldErrors naming n", err)
	}

	const query = "batch=2&bc=4&br=8&causal=1&d=16&heads=3&n=32&pattern=peaked&seed=7&trace_bh=1-2&trace_q=0-1&variant=flash1"
	v, _ := url.ParseQuery(query)
	run, err := ParseRun(v)
	if err != nil {
		t.Fatal(err)
	}
	c := run.Config()
	if got := c.Values().Encode(); got != query {
		t.Fatalf("ParseRun(%s).Config().Values() = %s", query, got)
	}
	if run.Key() != c.Key() {
		t.Fatalf("Key %q, Config's %q", run.Key(), c.Key())
	}
	good, err := c.Check()
	if err != nil || good != run {
		t.Fatalf("Check of a run's own config = %+v, %v; want %+v", good, err, run)
	}
}

func TestOversizeAdviceFits(t *testing.T) {
	t.Parallel()
	v, _ := url.ParseQuery("n=2048&d=128&br=32&bc=32&heads=4")
	_, err := ParseConfig(v)
	var fe FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("an oversized trace was accepted: %v", err)
	}
	msg := fe.ByField()[FieldTraceBH]
	// The advice names selections; each must parse and fit.
	for _, sel := range []string{"trace_bh=", "trace_q="} {
		i := strings.Index(msg, sel)
		if i < 0 {
			continue
		}
		arg := strings.Fields(msg[i:])[0]
		arg = strings.TrimRight(arg, ",")
		q := url.Values{}
		for k, vals := range v {
			q[k] = vals
		}
		k, val, _ := strings.Cut(arg, "=")
		q.Set(k, val)
		if k == FieldTraceQ {
			q.Set(FieldTraceBH, "0")
		}
		if _, err := ParseConfig(q); err != nil {
			t.Errorf("advice %q does not fit: %v", arg, err)
		}
	}
	if !strings.Contains(msg, "trace_q=") {
		t.Errorf("advice offers no q-tile selection: %s", msg)
	}
}

// TestFittingPartIsTheLongest holds the q-tiles FittingPart offers for an
// oversized run to the longest run that fits: they fit, and one q-tile more
// would not (or the run's traced q-tiles end there).
func TestFittingPartIsTheLongest(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, v := range rungs {
		for range 4 {
			c := Config{Variant: v.Variant, N: 1024 + rng.IntN(3073), D: 64 << rng.IntN(3), Batch: 1, Heads: 1 + rng.IntN(8),
				Causal: rng.IntN(2) == 1, Pattern: instrument.PatternNormal}
			c.Br, c.Bc = 1<<rng.IntN(7), 1<<rng.IntN(7)
			c.TraceQ = instrument.Range{Lo: rng.IntN(c.Tr() / 2), Hi: c.Tr()}
			part, ok := c.FittingPart()
			if !ok {
				one := c
				one.TraceBH, one.TraceQ.Hi = instrument.Range{Lo: 0, Hi: 1}, c.TraceQ.Lo+1
				if size := one.TraceBytes(); size <= MaxTraceBytes {
					t.Errorf("%s %+v: no part offered, but its first q-tile fits (%d bytes)", v.Name(), c, size)
				}
				continue
			}
			q := part.TraceQ
			if q.Lo != c.TraceQ.Lo || part.TraceBH.Len() != 1 {
				t.Errorf("%s: the part starts at q-tile %d of batch-head range %v, want q-tile %d of one batch-head", v.Name(), q.Lo, part.TraceBH, c.TraceQ.Lo)
			}
			if size := part.TraceBytes(); size > MaxTraceBytes {
				t.Errorf("%s %+v: the part %v is %d bytes, above the limit", v.Name(), c, q, size)
			}
			if q.Hi < c.TraceQ.Hi {
				more := part
				more.TraceQ.Hi++
				if size := more.TraceBytes(); size <= MaxTraceBytes {
					t.Errorf("%s %+v: the part ends at q-tile %d, but %d bytes with one more fit", v.Name(), c, q.Hi, size)
				}
			}
		}
	}
}

func TestConfigValuesRoundTrip(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 200 {
		c := randomConfig(rng)
		c.Engine = []instrument.Source{instrument.SourceAny, instrument.SourceGPU, instrument.SourceCPUMirror}[rng.IntN(3)]
		if c.TraceBH == (instrument.Range{}) && c.TraceQ == (instrument.Range{}) && rng.IntN(3) == 0 {
			c.Timing = true
			c.Roles = Info(c.Variant).Roles != nil && rng.IntN(2) == 0
		}
		back, err := ParseConfig(c.Values())
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if back != c {
			t.Fatalf("round trip changed %+v into %+v", c, back)
		}
	}
}

// FuzzParseConfig: no query panics the parser, and every configuration it
// accepts is within the limits and runs.
func FuzzParseConfig(f *testing.F) {
	f.Add("n=8&d=4&br=2&bc=2&causal=1&pattern=large&seed=3")
	f.Add("variant=naive&n=17&br=5&bc=3&trace_q=1-2&trace_bh=0")
	f.Add("n=99999999999999999999&trace_bh=-3--1")
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		run, err := ParseRun(v)
		c := run.Config()
		if err != nil {
			var fe FieldErrors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("error %v is not a list of field errors", err)
			}
			return
		}
		if c.N < 1 || c.N > MaxN || c.D < 1 || c.D > MaxD || c.TraceBytes() > MaxTraceBytes {
			t.Fatalf("accepted out of limits: %+v", c)
		}
		if c.TraceBytes() > 256<<10 {
			return // keep the fuzzer fast: run only small traces
		}
		n := 0
		if err := RunMirror(context.Background(), run, func(*instrument.Record) error { n++; return nil }); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if h := c.Header(instrument.SourceCPUMirror, ""); n != h.Records {
			t.Fatalf("%+v: %d records, header says %d", c, n, h.Records)
		}
	})
}

func BenchmarkMirrorFlash2N1024(b *testing.B) {
	c := Config{Variant: instrument.VariantFlash2, N: 1024, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal}
	benchMirror(b, c)
}

func BenchmarkMirrorNaiveN1024(b *testing.B) {
	c := Config{Variant: instrument.VariantNaive, N: 1024, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal}
	benchMirror(b, c)
}

func benchMirror(b *testing.B, c Config) {
	run := mustRun(b, c)
	h := c.Header(instrument.SourceCPUMirror, MirrorLabel)
	b.SetBytes(c.TraceBytes())
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		err := RunMirror(context.Background(), run, func(r *instrument.Record) error {
			var err error
			buf, err = instrument.AppendRecord(buf, &h, r)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(4*c.N*c.N*c.D)/1e9*float64(b.N)/b.Elapsed().Seconds(), "GFLOP/s")
}
