package lessons

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/kernels"
)

// The Hopper lesson's asks: the arithmetic by which the ladder's Hopper
// rungs move tiles and registers, worked out on the server from the
// directive's sizes as the kernels work it out (kernels/cuda/hopper/tma.cuh,
// flash3_tma.cu, flash3_ws.cu): the bytes an mbarrier is told to expect
// for a tile the TMA engine copies, the copies one kv-tile takes, the
// stage and phase parity a consumer waits on, and the registers setmaxnreg
// can give a consumer. As with every ask, the answer is never in the
// lesson.
//
//	::: checkpoint id=k-bytes ask=tx-bytes rows=128 d=64 n=1000
//	How many bytes does expect_tx announce for the last K tile?
//	:::

// The hardware's numbers these asks rest on.
const (
	// smRegisters is one SM's register file: 65,536 registers of 32 bits,
	// shared by the threads of the blocks it runs.
	smRegisters = 65536
	// warpgroupThreads: a warpgroup is four warps of 32 threads.
	warpgroupThreads = 128
	// setmaxnreg takes a count of registers a thread from 24 to 256, a
	// multiple of 8 (PTX ISA, setmaxnreg).
	setmaxnregMin, setmaxnregMax, setmaxnregStep = 24, 256, 8
	// tmaMaxBoxRows: a TMA box is at most 256 elements along each dimension.
	tmaMaxBoxRows = 256
	// bf16Bytes is one bf16 element, f32Bytes one float32.
	bf16Bytes, f32Bytes = 2, 4
	// hopperMaxD is the widest head dim these asks take: four boxes.
	hopperMaxD = 4 * kernels.TensorMapBoxCols
)

// HopperQuestion is the sizes a Hopper ask is about.
type HopperQuestion struct {
	Rows, D int // tx-bytes, stage-bytes: a tile's rows and head dim; tma-copies: the head dim alone
	// N, for tx-bytes and stage-bytes, is the sequence length whose last
	// kv-tile (q-tile) is asked about (it may be ragged); 0 asks about any
	// whole tile.
	N int
	// Stages, for parity, is how many buffers the kv-tiles take in turn
	// (the kv-tile is the checkpoint's KV).
	Stages int
	// Producer, for setmaxnreg, is the registers a thread the producer
	// warpgroup keeps; Consumers, how many consumer warpgroups share the
	// rest.
	Producer, Consumers int
}

// onHopper is what the Hopper asks share: no preset (their input is the
// directive's sizes), and their source.
type onHopper struct{}

func (onHopper) ownInput() {}

func (onHopper) source(*Checkpoint) string {
	return "the Hopper kernels' arithmetic (kernels/cuda/hopper/tma.cuh, flash3_tma.cu, flash3_ws.cu), worked out on the server from the question's sizes"
}

// noPreset: a Hopper ask reads no run.
func (onHopper) noPreset(c *Checkpoint, d *directive) {
	if c.Preset != "" {
		d.failf("ask=%s works on the sizes its attributes give, not on a preset's run", c.Ask)
	}
}

// readHeadDim reads d=, a head dim made of whole TMA boxes.
func readHeadDim(d *directive) int {
	box := kernels.TensorMapBoxCols
	v := d.whole("d", -1, box, hopperMaxD)
	if v%box != 0 {
		d.failf("d must be a multiple of %d (whole TMA boxes), got %d", box, v)
	}
	return v
}

// txBytes asks how many bytes thread 0 tells a tile's mbarrier to expect
// (mbarrier.arrive.expect_tx) before it copies the tile: a whole number of
// bytes, exactly.
type txBytes struct{ onHopper }

func (a txBytes) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	h := &c.Hopper
	h.Rows = d.whole("rows", -1, 1, tmaMaxBoxRows)
	h.D = readHeadDim(d)
	h.N = d.whole("n", 0, 1, 1<<20)
	c.Format = grading.FormatNumber
}

func (txBytes) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	h := c.Hopper
	n := h.Rows * h.D * bf16Bytes
	boxes := h.D / kernels.TensorMapBoxCols
	explain := fmt.Sprintf("The tile is %d rows of d = %d bf16 numbers, %d bytes each: %d · %d · %d = %d bytes, copied as %s of %d columns, each counting the bytes it writes off the same barrier.",
		h.Rows, h.D, bf16Bytes, h.Rows, h.D, bf16Bytes, n, plural(boxes, "box", "boxes"), kernels.TensorMapBoxCols)
	if h.N > 0 {
		last := (h.N - 1) / h.Rows
		real := h.N - last*h.Rows
		if real < h.Rows {
			explain += fmt.Sprintf(" With N = %d the last kv-tile, kv-tile %d, holds only %d − %d · %d = %d real rows; the TMA unit writes the other %d rows of the box as zeros and counts their bytes too, so expect_tx announces the whole box's %d bytes. Announce fewer and the phase can complete while bytes are still landing; announce more and it never completes.",
				h.N, last, h.N, last, h.Rows, real, h.Rows-real, n)
		} else {
			explain += fmt.Sprintf(" With N = %d the last kv-tile, kv-tile %d, is whole: all %d of its rows are real.", h.N, last, h.Rows)
		}
	}
	return grading.Solution{Number: float64(n), Display: strconv.Itoa(n) + " bytes", Lo: 0, Hi: math.Inf(1),
		Why: "a count of bytes is not negative", Explain: explain}, nil
}

// pose's hint says what the count is made of, never the count.
func (txBytes) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Bytes, func(float64) string {
		return "Not quite. expect_tx announces every byte the tile's copies will count off the barrier: the tile's rows times its head dim, at two bytes a bf16 element. The TMA unit always writes a whole box, rows past N included (it fills them with zeros), and counts every byte it writes."
	})
}

// stageBytes asks how many bytes one stage of flash3_bwd_tma's q-tile
// pipeline tells its mbarrier to expect: the q-tile's Q_i and dO_i (rows ×
// d bf16 each, whole boxes) and its L_i·log2 e and D_i (rows floats each,
// which the pre kernel laid out in whole q-tiles): a whole number, exactly.
type stageBytes struct{ onHopper }

func (a stageBytes) parse(c *Checkpoint, d *directive) {
	txBytes{}.parse(c, d)
}

func (stageBytes) source(*Checkpoint) string {
	return "the Hopper backward's arithmetic (kernels/cuda/hopper/flash3_bwd_tma.cu, its pre kernel in common/bwd_ends.cuh), worked out on the server from the question's sizes"
}

func (stageBytes) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	h := c.Hopper
	panels := h.Rows * h.D * bf16Bytes
	runs := h.Rows * f32Bytes
	n := 2*panels + 2*runs
	explain := fmt.Sprintf("Q_i and dO_i are %d rows of d = %d bf16 numbers: %d · %d · %d = %d bytes each. L_i·log2 e and D_i are one float32 a row: %d · %d = %d bytes each. The stage's barrier counts all four: 2 · %d + 2 · %d = %d bytes.",
		h.Rows, h.D, h.Rows, h.D, bf16Bytes, panels, h.Rows, f32Bytes, runs, panels, runs, n)
	if h.N > 0 {
		last := (h.N - 1) / h.Rows
		real := h.N - last*h.Rows
		if real < h.Rows {
			explain += fmt.Sprintf(" With N = %d the last q-tile, q-tile %d, holds %d − %d · %d = %d real rows, and the stage still expects %d bytes: the copy engine writes Q_i's and dO_i's boxes whole, the %d rows past N as zeros, and counts them; L and D are read from the pre kernel's layout in whole q-tiles (its rows past N are zeros), because a copy must start on a 16-byte boundary, which a batch-head's rows of the forward's L do not when N is not a multiple of 4.",
				h.N, last, h.N, last, h.Rows, real, n, h.Rows-real)
		} else {
			explain += fmt.Sprintf(" With N = %d the last q-tile, q-tile %d, is whole.", h.N, last)
		}
	}
	return grading.Solution{Number: float64(n), Display: strconv.Itoa(n) + " bytes", Lo: 0, Hi: math.Inf(1),
		Why: "a count of bytes is not negative", Explain: explain}, nil
}

// pose's hint says what the count is made of, never the count.
func (stageBytes) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Bytes, func(float64) string {
		return "Not quite. The stage's barrier counts every byte of its four copies: Q_i and dO_i at two bytes a bf16 element, L_i·log2 e and D_i at four bytes a float, each for every row of the q-tile. The copies are whole, rows past N included."
	})
}

// tmaCopies asks how many TMA copy instructions thread 0 issues for one
// kv-tile, its K and its V: a whole number, exactly.
type tmaCopies struct{ onHopper }

func (a tmaCopies) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	c.Hopper.D = readHeadDim(d)
	c.Format = grading.FormatNumber
}

func (tmaCopies) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	box := kernels.TensorMapBoxCols
	per := c.Hopper.D / box
	n := 2 * per
	return grading.Solution{Number: float64(n), Display: strconv.Itoa(n), Lo: 0, Hi: math.Inf(1),
		Why: "a count of instructions is not negative",
		Explain: fmt.Sprintf("A box is at most %d bf16 columns wide, the 128 bytes of one row of the 128-byte swizzle, and may hold up to %d rows. A K tile of d = %d columns is %d / %d = %s, one copy instruction each (UTMALDG in the SASS), and the V tile as many: %d · %d = %d copies a kv-tile, however many rows the tile has.",
			box, tmaMaxBoxRows, c.Hopper.D, c.Hopper.D, box, plural(per, "box", "boxes"), 2, per, n)}, nil
}

func (tmaCopies) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Plain, func(float64) string {
		return "Not quite. One TMA instruction copies one box, and a box is at most 64 bf16 columns wide (one row of the 128-byte swizzle) however many rows it holds: count the boxes across a tile's d columns, then remember that thread 0 copies two tiles each kv-tile, K and V."
	})
}

// stageParity asks which stage a consumer reads kv-tile j from and which
// phase parity it waits for on that stage's full barrier: one of the
// (stage, parity) pairs.
type stageParity struct{ onHopper }

func (a stageParity) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	c.KV = d.whole("kv", -1, 0, 4095)
	c.Hopper.Stages = d.whole("stages", -1, 2, 4)
	c.Format = grading.FormatChoice
	for s := 0; s < c.Hopper.Stages; s++ {
		for p := 0; p < 2; p++ {
			c.Choices = append(c.Choices, parityOption(s, p))
		}
	}
}

func parityOption(stage, parity int) grading.Option {
	return grading.Option{Value: fmt.Sprintf("stage%d-parity%d", stage, parity), Label: fmt.Sprintf("stage %d, parity %d", stage, parity)}
}

func (stageParity) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	j, st := c.KV, c.Hopper.Stages
	stage, use := j%st, j/st
	parity := use & 1
	o := parityOption(stage, parity)
	var tiles []string
	for k := stage; k <= j && len(tiles) < 5; k += st {
		tiles = append(tiles, strconv.Itoa(k))
	}
	list := strings.Join(tiles, ", ")
	if use+1 > len(tiles) {
		list += ", …, " + strconv.Itoa(j)
	}
	before := "It is the stage's first fill: phase 0 completes when it lands."
	if use > 0 {
		before = fmt.Sprintf("The phase before it, %d, completed for kv-tile %d with parity %d: one bit tells the two apart, and one bit is enough, because the producer cannot fill the stage again before the consumers have emptied it, so the barrier is never two phases ahead of them.", use-1, j-st, (use-1)&1)
	}
	return grading.Solution{Choice: o.Value, Display: o.Label,
		Explain: fmt.Sprintf("The %d stages are filled in turn, so kv-tile %d lands in stage %d mod %d = %d. Stage %d holds kv-tiles %s: tile %d is its fill %d, counting from 0, so the stage's full barrier completes its phase %d when tile %d has landed, and a consumer waits for parity %d mod 2 = %d. %s",
			st, j, j, st, stage, stage, list, j, use, use, j, use, parity, before)}, nil
}

// pose's hint is the rule for both halves of the pair, never the pair.
func (stageParity) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.choice(key, func(string) string {
		return "Not that one. The stages are filled in turn, so kv-tile j lands in stage j mod S, S the number of stages. Each fill of a stage is one phase of its full barrier, numbered from 0: count the kv-tiles that went into the same stage before tile j, and that count is tile j's phase, ⌊j / S⌋. A waiter names only the phase's parity, the lowest bit of that number."
	})
}

// consumerRegisters asks how many registers a thread each consumer
// warpgroup may ask setmaxnreg for, once the producer warpgroup keeps only
// its own few and the block is alone on its SM: a whole number, exactly.
type consumerRegisters struct{ onHopper }

func (a consumerRegisters) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	h := &c.Hopper
	h.Producer = d.whole("producer", -1, setmaxnregMin, setmaxnregMax)
	if h.Producer%setmaxnregStep != 0 {
		d.failf("producer must be a multiple of %d, as setmaxnreg's count is, got %d", setmaxnregStep, h.Producer)
	}
	// One consumer warpgroup could take more than setmaxnreg's 256: the
	// answer would be that bound, which a hint may not give.
	h.Consumers = d.whole("consumers", -1, 2, 3)
	c.Format = grading.FormatNumber
}

// maxConsumerRegisters is the most registers a thread setmaxnreg can give
// each of consumers warpgroups, when a producer warpgroup keeps producer
// registers a thread and the block has the SM's registers to itself.
func maxConsumerRegisters(producer, consumers int) int {
	left := smRegisters - warpgroupThreads*producer
	per := left / (warpgroupThreads * consumers)
	return min(per/setmaxnregStep*setmaxnregStep, setmaxnregMax)
}

func (consumerRegisters) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	h := c.Hopper
	kept := warpgroupThreads * h.Producer
	left := smRegisters - kept
	threads := warpgroupThreads * h.Consumers
	r := maxConsumerRegisters(h.Producer, h.Consumers)
	used := kept + threads*r
	return grading.Solution{Number: float64(r), Display: strconv.Itoa(r), Lo: setmaxnregMin, Hi: setmaxnregMax,
		Why: fmt.Sprintf("setmaxnreg takes a count from %d to %d registers a thread", setmaxnregMin, setmaxnregMax),
		Explain: fmt.Sprintf("The block, one producer and %d consumer warpgroups of %d threads, has the SM's %d registers to itself. The producer's %d threads keep %d each, %d; that leaves %d − %d = %d for the %d consumer threads, %s a thread, and setmaxnreg counts in steps of %d: %d. All told %d + %d · %d = %d of the %d.",
			h.Consumers, warpgroupThreads, smRegisters, warpgroupThreads, h.Producer, kept, smRegisters, kept, left, threads, strconv.FormatFloat(float64(left)/float64(threads), 'g', 4, 64), setmaxnregStep, r,
			kept, threads, r, used, smRegisters)}, nil
}

// pose's hint is the sharing and the rounding, never the count. It names
// no warpgroup's thread count: that may be the answer.
func (consumerRegisters) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Plain, func(float64) string {
		return "Not quite. The SM's 65,536 registers are shared by every thread of the block: take away what the producer warpgroup's threads keep (a warpgroup is four warps), share what is left evenly among the consumer warpgroups' threads, and round down to setmaxnreg's step, a multiple of 8."
	})
}

// plural is n and its noun, singular or plural.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
