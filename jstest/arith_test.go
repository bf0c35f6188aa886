package jstest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/lessons/playground"
)

// playground.json: the playground's arithmetic as package playground does
// it in Go, which grades its checkpoints (static/js/playground_math.js
// must agree): rounding to float16, bfloat16 and float32 at the edges of
// each format and across every binade, bit for bit; rows of logits worked
// tile by tile in each type, the max subtraction on and off.

type roundCase struct {
	X    num `json:"x"`
	F16  num `json:"f16"`
	BF16 num `json:"bf16"`
	F32  num `json:"f32"`
}

type tileCase struct {
	Start int   `json:"start"`
	End   int   `json:"end"`
	MOld  num   `json:"mOld"`
	MTile num   `json:"mTile"`
	MNew  num   `json:"mNew"`
	Alpha num   `json:"alpha"`
	P     []num `json:"p"`
	L     num   `json:"l"`
}

type runCase struct {
	Logits      []num      `json:"logits"`
	Tile        int        `json:"tile"`
	Max         bool       `json:"max"`
	Dtype       string     `json:"dtype"`
	Stored      []num      `json:"stored"`
	Tiles       []tileCase `json:"tiles"`
	Weights     []num      `json:"weights"`
	Exact       []num      `json:"exact"`
	FirstInf    int        `json:"firstInf"`
	FirstExpInf int        `json:"firstExpInf"`
}

func playgroundFixtures(t *testing.T, files map[string][]byte) {
	rng := rand.New(rand.NewPCG(3, 17))
	ulp := math.Ldexp
	xs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		65504, 65519.99, 65520, 65527, 65535.9, 1 + ulp(1, -11), 1 + 3*ulp(1, -11), 1 + ulp(1, -8), 1 + 3*ulp(1, -8),
		ulp(1, -14), ulp(1, -24), ulp(1, -25), 3 * ulp(1, -26), ulp(1, -149), ulp(1, -150), ulp(3, -151),
		0.1, -2.5, math.MaxFloat32, 3.39e38, 3.3962e38, 3.4028235677973366e38, 1e39, -1e39}
	for range 700 {
		x := math.Ldexp(rng.Float64()+0.5, rng.IntN(180)-40)
		if rng.IntN(2) == 0 {
			x = -x
		}
		xs = append(xs, x)
	}
	// Ties: exact midpoints between neighbours of each format.
	for range 150 {
		e := rng.IntN(30) - 14
		m := float64(1024 + rng.IntN(1024))
		xs = append(xs, math.Ldexp(m+0.5, e-10)) // float16
		e = rng.IntN(200) - 100
		m = float64(128 + rng.IntN(128))
		xs = append(xs, math.Ldexp(m+0.5, e-7)) // bfloat16
	}
	var rounds []roundCase
	for _, x := range xs {
		rounds = append(rounds, roundCase{num(x), num(playground.Float16(x)), num(playground.BFloat16(x)), num(playground.Float32(x))})
	}

	var runs []runCase
	for try := range 80 {
		n := 1 + rng.IntN(playground.MaxLogits)
		logits := make([]float64, n)
		scale := []float64{1, 10, 60, 1000}[try%4]
		for k := range logits {
			logits[k] = math.Round(rng.NormFloat64()*scale*1000) / 1000
		}
		s := playground.Settings{Logits: logits, Tile: 1 + rng.IntN(n), SubtractMax: try%2 == 0, Dtype: playground.Dtypes[try%len(playground.Dtypes)]}
		r := playground.Run(s)
		c := runCase{Logits: nums(logits), Tile: s.Tile, Max: s.SubtractMax, Dtype: string(s.Dtype), Stored: nums(r.Stored),
			Weights: nums(r.Weights), Exact: nums(r.Exact), FirstInf: r.FirstInf, FirstExpInf: r.FirstExpInf}
		for _, tl := range r.Tiles {
			c.Tiles = append(c.Tiles, tileCase{tl.Start, tl.End, num(tl.MOld), num(tl.MTile), num(tl.MNew), num(tl.Alpha), nums(tl.P), num(tl.L)})
		}
		runs = append(runs, c)
	}
	files["playground.json"] = jsonFile(t, map[string]any{"round": rounds, "runs": runs, "maxLogits": playground.MaxLogits})
}

// lab.json: the lab's tolerance as the kernel track grades with it
// (lab.Within, lab.ScaleOf), which static/js/lab_grade.js must share.

type withinCase struct {
	Y      num  `json:"y"`
	K      num  `json:"k"`
	Scale  num  `json:"scale"`
	Within bool `json:"within"`
}

type scaleCase struct {
	Values []num `json:"values"`
	Scale  num   `json:"scale"`
}

func labFixtures(t *testing.T, files map[string][]byte) {
	rng := rand.New(rand.NewPCG(5, 23))
	var within []withinCase
	add := func(y, k, scale float64) {
		within = append(within, withinCase{num(y), num(k), num(scale), lab.Within(y, k, scale)})
	}
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range [][3]float64{{nan, 1, 1}, {1, nan, 1}, {nan, nan, 1}, {inf, inf, 1}, {-inf, -inf, 1}, {inf, -inf, 1},
		{-1e30, -inf, 1}, {inf, 1, 1}, {1, inf, 1}, {0, 0, 1e-30}, {1e-35, 0, 1e-30}} {
		add(c[0], c[1], c[2])
	}
	for range 300 {
		k := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(10)-5))
		scale := math.Abs(k) * math.Pow(10, rng.Float64()*3)
		bound := lab.REL*math.Abs(k) + lab.ABS*scale
		// Either side of the bound, and far off.
		f := []float64{0, 0.5, 0.99, 0.999999, 1.000001, 1.01, 2, 1e6}[rng.IntN(8)]
		if rng.IntN(2) == 0 {
			f = -f
		}
		add(k+f*bound, k, scale)
	}
	var scales []scaleCase
	for _, vs := range [][]float64{{}, {0, 0}, {-inf, 2, nan, -3}, {inf}, {nan}} {
		scales = append(scales, scaleCase{nums(vs), num(lab.ScaleOf(vs))})
	}
	for range 100 {
		vs := make([]float64, rng.IntN(12))
		for k := range vs {
			vs[k] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-4))
			if rng.IntN(10) == 0 {
				vs[k] = []float64{inf, -inf, nan}[rng.IntN(3)]
			}
		}
		scales = append(scales, scaleCase{nums(vs), num(lab.ScaleOf(vs))})
	}
	files["lab.json"] = jsonFile(t, map[string]any{"rel": lab.REL, "abs": lab.ABS, "within": within, "scaleOf": scales})
}

// rungs.json: the rungs every page carries (kernels.RungsForPages, the
// layout's fs-rungs), which the steps' words and the trace model read.
func rungFixtures(t *testing.T, files map[string][]byte) {
	b, err := json.Marshal(kernels.RungsForPages())
	if err != nil {
		t.Fatal(err)
	}
	files["rungs.json"] = append(b, '\n')
}
