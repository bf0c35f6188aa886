package lessons_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"flashstep/kernels"
	"flashstep/lessons"
)

// {{backward KERNEL tflops|ms}} is the backward bench's row, formatted as
// the other measured figures; FigureNumber gives it unrounded, and a ratio
// figure may divide by it. {{vs-sdpa-backward KERNEL…}} and
// {{vs-cudnn-backward KERNEL…}} are the lowest and highest of the named
// rows' TFLOP/s over SDPA's backend in the same row. A kernel the
// recording does not hold is named in the error, with what it holds.
func TestBackwardFigures(t *testing.T) {
	t.Parallel()
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	rec := tab.Backward
	if rec == nil || len(rec.Rows) == 0 {
		t.Fatal("no backward recording ships")
	}
	var names []string
	flashLo, flashHi, cudnnLo, cudnnHi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, r := range rec.Rows {
		names = append(names, r.Kernel)
		for unit, want := range map[string]string{"tflops": fmt.Sprintf("%.1f", r.TFLOPs), "ms": strconv.FormatFloat(r.Ms, 'g', 3, 64)} {
			tok := "backward " + r.Kernel + " " + unit
			if got, err := lessons.Figure(tok); err != nil || got != want {
				t.Errorf("{{%s}} reads %q (%v), want %q", tok, got, err, want)
			}
		}
		if v, err := lessons.FigureNumber("backward " + r.Kernel + " tflops"); err != nil || v != r.TFLOPs {
			t.Errorf("%s: FigureNumber %v (%v), want %v", r.Kernel, v, err, r.TFLOPs)
		}
		flash, cudnn := r.TFLOPs / *r.SDPAFlash, r.TFLOPs / *r.SDPACuDNN
		flashLo, flashHi, cudnnLo, cudnnHi = min(flashLo, flash), max(flashHi, flash), min(cudnnLo, cudnn), max(cudnnHi, cudnn)
		for kind, want := range map[string]float64{"vs-sdpa-backward": flash, "vs-cudnn-backward": cudnn} {
			if got, err := lessons.Figure(kind + " " + r.Kernel); err != nil || got != fmt.Sprintf("%.2f to %.2f", want, want) {
				t.Errorf("{{%s %s}} reads %q (%v), want %.2f to %.2f", kind, r.Kernel, got, err, want, want)
			}
		}
	}
	all := strings.Join(names, " ")
	if got, err := lessons.Figure("vs-sdpa-backward " + all); err != nil || got != fmt.Sprintf("%.2f to %.2f", flashLo, flashHi) {
		t.Errorf("over every row, against FlashAttention-2: %q (%v), want %.2f to %.2f", got, err, flashLo, flashHi)
	}
	if got, err := lessons.Figure("vs-cudnn-backward " + all); err != nil || got != fmt.Sprintf("%.2f to %.2f", cudnnLo, cudnnHi) {
		t.Errorf("over every row, against cuDNN: %q (%v), want %.2f to %.2f", got, err, cudnnLo, cudnnHi)
	}
	a, b := rec.Rows[0], rec.Rows[len(rec.Rows)-1]
	tok := fmt.Sprintf("ratio backward %s ms / backward %s ms", a.Kernel, b.Kernel)
	if got, err := lessons.Figure(tok); err != nil || got != strconv.FormatFloat(a.Ms/b.Ms, 'f', 1, 64) {
		t.Errorf("{{%s}} reads %q (%v), want %.1f", tok, got, err, a.Ms/b.Ms)
	}
	for bad, says := range map[string]string{
		"backward flash2_bwd_mma_bc32_d64 tflops":                     `no kernel "flash2_bwd_mma_bc32_d64"; it holds ` + names[0],
		"backward " + a.Kernel:                                        "say tflops or ms",
		"backward " + a.Kernel + " " + b.Kernel + " tflops":           "names one kernel",
		"vs-sdpa-backward":                                            "names at least one kernel",
		"vs-cudnn-backward " + a.Kernel + " flash2_bwd_mma_d64":       `no kernel "flash2_bwd_mma_d64"`,
		"vs-sdpa-backward " + a.Kernel + " d=64":                      "nothing else",
		"ratio backward " + a.Kernel + " tflops / backward nobody ms": `no kernel "nobody"`,
		"vs-sdpa-bwd " + a.Kernel:                                     "vs-sdpa-backward",
	} {
		if got, err := lessons.Figure(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("{{%s}} reads %q (%v); want an error saying %q", bad, got, err, says)
		}
	}
}

// Lesson 13, "On tensor cores", held to the backward bench and the kernel:
//   - the tiles its ratios name are the faster of the two at each shape
//     (64 kv rows at d = 64, 128 at d = 128, plain and causal): "runs the
//     faster one at each head dim";
//   - at d = 128 the 64-row tile is slower than the 128-row one, and with
//     its dQ staged only one of its blocks fits an SM's shared memory;
//     at d = 64 two of its blocks fit an SM (registers and shared memory);
//   - the lesson's ratio tokens name exactly those four rows.
func TestClaimBackwardTiles(t *testing.T) {
	t.Parallel()
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	tflops := func(kernel string) float64 {
		t.Helper()
		r, err := tab.Backward.Row(kernel)
		if err != nil {
			t.Fatal(err)
		}
		return r.TFLOPs
	}
	var faster []string
	for _, d := range []int{64, 128} {
		for _, causal := range []string{"", "_causal"} {
			bc64, bc128 := fmt.Sprintf("flash2_bwd_mma_bc64_d%d%s", d, causal), fmt.Sprintf("flash2_bwd_mma_bc128_d%d%s", d, causal)
			want, other := bc64, bc128
			if d == 128 {
				want, other = bc128, bc64
			}
			if tflops(want) <= tflops(other) {
				t.Errorf("d=%d%s: %s at %.1f TFLOP/s, %s at %.1f; the lesson says the first is the faster", d, causal, want, tflops(want), other, tflops(other))
			}
			faster = append(faster, want)
		}
	}
	// An H100 SM: 65,536 registers, allocated a warp at a time in steps of
	// 256 (8 a thread); 228 KiB of shared memory, 1 KiB of it reserved for
	// each block.
	blocksPerSM := func(bc, d int) int {
		t.Helper()
		tile := kernels.Tile{Br: 64, Bc: bc, D: d}
		name := fmt.Sprintf("flash2_bwd_mma_main_br64_bc%d_d%d", bc, d)
		regs := 0
		for _, f := range kernels.Ptxas() {
			if f.Kernel == name {
				regs = f.Registers
			}
		}
		if regs == 0 {
			t.Fatalf("ptxas lists no %s", name)
		}
		threads := bc / 16 * 32
		byRegs := 65536 / ((regs + 7) / 8 * 8 * threads)
		byShared := 228 * 1024 / (kernels.Flash2BwdMMASharedBytes(tile) + 1024)
		return min(byRegs, byShared)
	}
	if n := blocksPerSM(64, 128); n != 1 {
		t.Errorf("the 64-row tile at d=128: %d blocks an SM; the lesson says one", n)
	}
	if n := blocksPerSM(64, 64); n != 3 {
		t.Errorf("the 64-row tile at d=64: %d blocks an SM; the lesson says three", n)
	}
	if n := blocksPerSM(128, 64); n != 1 {
		t.Errorf("the 128-row tile at d=64: %d blocks an SM; the lesson says it has eight warps an SM", n)
	}
	text := lessonText(t, "course/13-backward.md")
	list := strings.Join([]string{faster[0], faster[1], faster[2], faster[3]}, " ")
	for _, said := range []string{"{{vs-sdpa-backward " + list + "}}", "{{vs-cudnn-backward " + list + "}}", "runs the faster one at each head dim",
		"only one of its blocks on an SM", "three blocks of the 64-row tile fit an SM"} {
		if !strings.Contains(text, said) {
			t.Errorf("lesson 13 no longer says %q: check the claim it makes instead here", said)
		}
	}
}

// Lesson 13, "On Hopper", held to the kernel and the bench: the registers
// it quotes are ptxas's for flash3_bwd_wgmma's main kernel at d = 128
// (untraced, both tiles), dK_j and dV_j of 64 kv rows at d = 128 take 128
// of them a thread, and the 128-row tile it quotes is the faster at d = 128.
func TestClaimHopperBackward(t *testing.T) {
	t.Parallel()
	text := lessonText(t, "course/13-backward.md")
	var lo, hi int
	for _, f := range kernels.Ptxas() {
		if f.Module == "flash3_bwd_wgmma" && strings.HasPrefix(f.Kernel, "flash3_bwd_wgmma_main_") && strings.HasSuffix(f.Kernel, "_d128") {
			if lo == 0 || f.Registers < lo {
				lo = f.Registers
			}
			hi = max(hi, f.Registers)
		}
	}
	if said := fmt.Sprintf("the compiler uses %d to %d of the 255", lo, hi); !strings.Contains(text, said) {
		t.Errorf("ptxas says %d to %d registers for the main kernel at d=128; the lesson should say %q", lo, hi, said)
	}
	const d, kvRows, threads = 128, 64, 128 // a warpgroup's share of the block
	if per := 2 * kvRows * d / threads; !strings.Contains(text, fmt.Sprintf("that is %d registers a thread", per)) {
		t.Errorf("dK_j and dV_j of %d kv rows at d=%d take %d registers a thread; the lesson says otherwise", kvRows, d, per)
	}
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, causal := range []string{"", "_causal"} {
		a, errA := tab.Backward.Row("flash3_bwd_wgmma_bc128_d128" + causal)
		b, errB := tab.Backward.Row("flash3_bwd_wgmma_bc64_d128" + causal)
		if errA != nil || errB != nil || a.TFLOPs <= b.TFLOPs {
			t.Errorf("d=128%s: the 128-row tile %+v is not the faster of %+v", causal, a, b)
		}
	}
}
