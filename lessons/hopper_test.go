package lessons_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/grading"
	"flashstep/internal/testrand"
	"flashstep/lessons"
)

// The Hopper lesson's asks on fresh sizes: each directive parsed as a
// lesson writes it, its answer held to the rule worked out here a second
// way (by counting, not by the grader's division), graded at its edges,
// against junk and NaN, and its hints checked for leaks. The sizes come
// from testrand's seed, which a failure prints.

// randomHopper draws sizes every Hopper ask accepts.
func randomHopper(rng *rand.Rand) lessons.HopperQuestion {
	return lessons.HopperQuestion{
		Rows:      1 + rng.IntN(256),
		D:         64 * (1 + rng.IntN(4)),
		N:         rng.IntN(5000), // 0: any tile
		Stages:    2 + rng.IntN(3),
		Producer:  24 + 8*rng.IntN(30),
		Consumers: 2 + rng.IntN(2),
	}
}

// hopperDirective writes the directive a lesson would for ask on h (kv,
// the parity's kv-tile).
func hopperDirective(ask string, h lessons.HopperQuestion, kv int) string {
	attrs := map[string]string{
		lessons.AskTxBytes:    fmt.Sprintf("rows=%d d=%d", h.Rows, h.D),
		lessons.AskStageBytes: fmt.Sprintf("rows=%d d=%d", h.Rows, h.D),
		lessons.AskTMACopies:  fmt.Sprintf("d=%d", h.D),
		lessons.AskParity:     fmt.Sprintf("kv=%d stages=%d", kv, h.Stages),
		lessons.AskSetmaxnreg: fmt.Sprintf("producer=%d consumers=%d", h.Producer, h.Consumers),
	}[ask]
	if (ask == lessons.AskTxBytes || ask == lessons.AskStageBytes) && h.N > 0 {
		attrs += fmt.Sprintf(" n=%d", h.N)
	}
	return fmt.Sprintf("::: checkpoint id=c ask=%s %s\nThe question, sizes and all.\n:::\n", ask, attrs)
}

// loadCheckpoint parses one directive in a lesson of its own.
func loadCheckpoint(t *testing.T, directive string) *lessons.Checkpoint {
	t.Helper()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	c, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + directive)}})
	if err != nil {
		t.Fatalf("%q: %v", directive, err)
	}
	return c.Lessons[0].Checkpoints[0]
}

// hopperTruth is each ask's answer worked out by counting: the bytes of
// the tile element by element, the boxes column by column, the fills of
// each stage tile by tile, and the largest step of 8 that still fits.
func hopperTruth(ask string, h lessons.HopperQuestion, kv int) (number float64, choice string) {
	switch ask {
	case lessons.AskTxBytes:
		return float64(h.Rows * h.D * 2), "" // bf16; zero-filled rows are written and counted too
	case lessons.AskStageBytes:
		bytes := 0
		for r := 0; r < h.Rows; r++ { // every row, real or past N
			bytes += 2*h.D*2 + 2*4 // its Q and dO in bf16, its L·log2 e and D in float32
		}
		return float64(bytes), ""
	case lessons.AskTMACopies:
		boxes := 0
		for col := 0; col < h.D; col += 64 {
			boxes++
		}
		return float64(2 * boxes), ""
	case lessons.AskParity:
		fills := make([]int, h.Stages)
		stage, use := 0, 0
		for j := 0; j <= kv; j++ {
			stage, use = j%h.Stages, fills[j%h.Stages]
			fills[stage]++
		}
		return 0, fmt.Sprintf("stage%d-parity%d", stage, use%2)
	case lessons.AskSetmaxnreg:
		r := 256
		for 128*h.Producer+128*h.Consumers*r > 65536 {
			r -= 8
		}
		return float64(r), ""
	}
	panic(ask)
}

var hopperAsks = []string{lessons.AskTxBytes, lessons.AskStageBytes, lessons.AskTMACopies, lessons.AskParity, lessons.AskSetmaxnreg}

func TestHopperAsksOnFreshSizes(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	draws := 40
	if testing.Short() {
		draws = 12
	}
	for range draws {
		h, kv := randomHopper(rng), rng.IntN(200)
		for _, ask := range hopperAsks {
			dir := hopperDirective(ask, h, kv)
			name := strings.TrimSpace(strings.SplitN(dir, "\n", 2)[0])
			c := loadCheckpoint(t, dir)
			if c.NeedsTrace() || c.Source() == "" {
				t.Fatalf("%s: needs a trace (%v) or names no source", name, c.NeedsTrace())
			}
			s, err := c.Solve(nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			number, choice := hopperTruth(ask, h, kv)
			if s.Explain == "" || s.Display == "" {
				t.Errorf("%s: solution %+v", name, s)
			}
			for _, a := range junk {
				if v := c.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" {
					t.Errorf("%s: %q graded %+v", name, a, v)
				}
			}
			if c.Format == grading.FormatChoice {
				if s.Choice != choice {
					t.Errorf("%s: answer %s, counting says %s", name, s.Choice, choice)
				}
				for _, o := range c.Choices {
					v := c.Grade(o.Value, false, s)
					if v.Correct != (o.Value == choice) {
						t.Errorf("%s: option %s graded %+v", name, o.Value, v)
					}
					if !v.Correct && (!strings.HasPrefix(v.Hint, "Not that one.") || leaks(c, s, 0, o.Value, v.Hint) != "") {
						t.Errorf("%s: option %s's hint %q", name, o.Value, v.Hint)
					}
				}
				continue
			}
			if s.Number != number {
				t.Errorf("%s: answer %s, counting says %g", name, s.Display, number)
			}
			checkEdges(t, rng, name, c, s, askRules[ask])
			if s.Number < s.Lo || s.Number > s.Hi {
				t.Errorf("%s: the answer %g is outside its own plausible range [%g, %g]", name, s.Number, s.Lo, s.Hi)
			}
			for _, d := range []float64{1, 8, 100, -1, -8} {
				a := num(s.Number + d)
				if v := c.Grade(a, false, s); !v.Correct && leaks(c, s, 0, a, v.Hint) != "" {
					t.Errorf("%s: the hint to %s gives away %s: %q", name, a, leaks(c, s, 0, a, v.Hint), v.Hint)
				}
			}
		}
	}
}

// The bytes of a ragged last tile: the box is counted whole, the rows past
// N included, and the explanation says how many of them are zeros.
func TestTxBytesOfARaggedTile(t *testing.T) {
	t.Parallel()
	c := loadCheckpoint(t, "::: checkpoint id=c ask=tx-bytes rows=128 d=64 n=1000\nq\n:::\n")
	s, err := c.Solve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Number != 128*64*2 || !strings.Contains(s.Explain, "104 real rows") || !strings.Contains(s.Explain, "other 24 rows") {
		t.Errorf("%g bytes: %s", s.Number, s.Explain)
	}
	if v := c.Grade(strconv.Itoa(104*64*2), false, s); v.Correct {
		t.Errorf("the bytes of the real rows alone graded right: %+v", v)
	}
	for _, a := range []string{"16384", "16384 bytes", "16384 B", "16384.0"} {
		if v := c.Grade(a, false, s); !v.Correct {
			t.Errorf("%q graded %+v", a, v)
		}
	}
}

// A backward stage of a ragged last q-tile: its four copies are counted
// whole, and the explanation says why L and D are too.
func TestStageBytesOfARaggedQTile(t *testing.T) {
	t.Parallel()
	c := loadCheckpoint(t, "::: checkpoint id=c ask=stage-bytes rows=64 d=128 n=1000\nq\n:::\n")
	s, err := c.Solve(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := 2*64*128*2 + 2*64*4
	if s.Number != float64(want) || !strings.Contains(s.Explain, "40 real rows") || !strings.Contains(s.Explain, "16-byte boundary") {
		t.Errorf("%g bytes: %s", s.Number, s.Explain)
	}
	for _, wrong := range []int{2 * 64 * 128 * 2, 2*40*128*2 + 2*40*4, 64*128*2 + 64*4} { // the panels alone; the real rows alone; one of each
		if v := c.Grade(strconv.Itoa(wrong), false, s); v.Correct {
			t.Errorf("%d graded right: %+v", wrong, v)
		}
	}
	if v := c.Grade(strconv.Itoa(want)+" bytes", false, s); !v.Correct {
		t.Errorf("%d bytes graded %+v", want, v)
	}
}
