package traffic

import (
	"errors"
	"math"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
)

// TestPlanMemorySaturates: at the calculator's largest inputs naive's N×N
// matrices take 2^28·2^44·8 bytes, past int64; the plan says the most an
// int64 holds, not what the overflow leaves (S and P wrapped to 0 bytes,
// the inputs to 4 PiB).
func TestPlanMemorySaturates(t *testing.T) {
	t.Parallel()
	p, err := PlanMemory(MaxCalcB, MaxCalcH, MaxCalcN, MaxCalcD, instrument.DTypeF32, H100MemoryBytes)
	if err != nil {
		t.Fatal(err)
	}
	if p.NaiveSPBytes != math.MaxInt64 || p.InputsBytes != math.MaxInt64 || p.NaiveBytes != math.MaxInt64 || p.NaiveFits || p.FlashFits {
		t.Errorf("%+v", p)
	}
	// S and P alone overflow; the inputs, 2^28·(2^22·4·4 + 2^24) bytes, do not.
	p, _ = PlanMemory(MaxCalcB, MaxCalcH, MaxCalcN, 1, instrument.DTypeF32, H100MemoryBytes)
	if p.NaiveSPBytes != math.MaxInt64 || p.InputsBytes != 1<<28*(1<<22*16+1<<24) || p.NaiveBytes != math.MaxInt64 {
		t.Errorf("%+v", p)
	}
	if p.NaiveMaxN != 5 || p.FlashMaxN != 15 {
		t.Errorf("longest N: naive %d, flash %d", p.NaiveMaxN, p.FlashMaxN)
	}
	for _, x := range [][]int64{{math.MaxInt64, 2}, {1 << 32, 1 << 31}, {3, math.MaxInt64 / 2}} {
		if mul(x...) != math.MaxInt64 {
			t.Errorf("%v: mul %d", x, mul(x...))
		}
	}
	if mul(1<<31, 1<<31) != 1<<62 || add(math.MaxInt64-1, 1) != math.MaxInt64 || add(math.MaxInt64, 1) != math.MaxInt64 || mul(0, math.MaxInt64, 2) != 0 {
		t.Error("mul and add away from overflow")
	}
}

// TestPlanBackwardByHand: the lesson's batch, B=8, H=32, N=8192, d=64
// (256 batch-heads), worked by hand. Per batch-head, in float32: Q, K, V,
// O, dO 5·2 MiB, L 32 KiB, dQ, dK, dV 3·2 MiB; naive_bwd's P, dP and dS
// 3·256 MiB; flash's D 32 KiB. In bf16 the five inputs take 5 MiB and P
// 128 MiB; L, D, dP, dS and the gradients do not change.
func TestPlanBackwardByHand(t *testing.T) {
	t.Parallel()
	const mib, gib = 1 << 20, 1 << 30
	for _, tc := range []struct {
		dt                       instrument.DType
		naiveKernel, flashKernel string
		inputs, nn, delta, tile  int64
		naiveMaxN, flashMaxN     int
		naiveMaxN1, flashMaxN1   int // at B = H = 1
	}{
		// Tiles: flash2_bwd 4·(2·64·65 + 2·64·64 + 2·64·65 + 2·64);
		// flash2_bwd_mma 2·(2·64·64 + 4·64·64 + 64·64) + 4·4·64 + 4·16·(64 + 8)·4.
		{instrument.DTypeF32, "naive_bwd", "flash2_bwd", 4*gib + 8*mib, 192 * gib, 8 * mib, 99840, 5175, 161527, 84085, 41350920},
		{instrument.DTypeBF16, "", "flash2_bwd_mma", 2816*mib + 8*mib, 160 * gib, 8 * mib, 76800, 5692, 234533, 0, 0},
	} {
		p, err := PlanPass(PassBackward, 8, 32, 8192, 64, tc.dt, H100MemoryBytes)
		if err != nil {
			t.Fatal(err)
		}
		if p.Pass != PassBackward || p.NaiveKernel != tc.naiveKernel || p.FlashKernel != tc.flashKernel || p.DType != tc.dt.String() {
			t.Errorf("%s: names %q %q %q %q", tc.dt, p.Pass, p.NaiveKernel, p.FlashKernel, p.DType)
		}
		if p.InputsBytes != tc.inputs || p.NaiveNNBytes != tc.nn || p.FlashDeltaBytes != tc.delta || p.NaiveSPBytes != 0 {
			t.Errorf("%s: inputs %d (want %d), N×N %d (want %d), D %d (want %d), S and P %d", tc.dt, p.InputsBytes, tc.inputs, p.NaiveNNBytes, tc.nn, p.FlashDeltaBytes, tc.delta, p.NaiveSPBytes)
		}
		if p.NaiveBytes != tc.inputs+tc.nn || p.FlashBytes != tc.inputs+tc.delta || p.NaiveFits || !p.FlashFits {
			t.Errorf("%s: naive %d, flash %d, fits %v %v", tc.dt, p.NaiveBytes, p.FlashBytes, p.NaiveFits, p.FlashFits)
		}
		if p.FlashTileByte != tc.tile {
			t.Errorf("%s: a block's shared memory %d, want %d", tc.dt, p.FlashTileByte, tc.tile)
		}
		if p.NaiveMaxN != tc.naiveMaxN || p.FlashMaxN != tc.flashMaxN {
			t.Errorf("%s: longest N naive %d, flash %d; want %d, %d", tc.dt, p.NaiveMaxN, p.FlashMaxN, tc.naiveMaxN, tc.flashMaxN)
		}
		if tc.naiveMaxN1 == 0 {
			continue
		}
		// One batch-head: naive holds 12n² + (5·256 + 4 + 3·256)n bytes,
		// 12·84085² + 2052·84085 = 85015989120 of the H100's 85017493504;
		// flash 2056n, and 2056·41350920 = 85017491520.
		q, _ := PlanPass(PassBackward, 1, 1, 1, 64, tc.dt, H100MemoryBytes)
		if q.NaiveMaxN != tc.naiveMaxN1 || q.FlashMaxN != tc.flashMaxN1 {
			t.Errorf("%s, one batch-head: longest N naive %d, flash %d; want %d, %d", tc.dt, q.NaiveMaxN, q.FlashMaxN, tc.naiveMaxN1, tc.flashMaxN1)
		}
	}
	// The forward on the same batch holds S and P, 2·256 MiB a batch-head,
	// and no dO or gradients: the backward's naive needs half as much again
	// as the forward's and stops at a shorter N.
	f, _ := PlanPass(PassForward, 8, 32, 8192, 64, instrument.DTypeF32, H100MemoryBytes)
	b, _ := PlanPass(PassBackward, 8, 32, 8192, 64, instrument.DTypeF32, H100MemoryBytes)
	if f.Pass != PassForward || f.NaiveNNBytes != 128*gib || f.NaiveSPBytes != f.NaiveNNBytes || f.FlashDeltaBytes != 0 || f.InputsBytes != 2*gib+8*mib {
		t.Errorf("forward %+v", f)
	}
	if 2*b.NaiveNNBytes != 3*f.NaiveNNBytes || b.NaiveMaxN >= f.NaiveMaxN || b.FlashMaxN >= f.FlashMaxN {
		t.Errorf("backward %+v against forward %+v", b, f)
	}
	// "" is the forward; anything else not a pass.
	if d, err := PlanPass("", 8, 32, 8192, 64, instrument.DTypeF32, H100MemoryBytes); err != nil || d != f {
		t.Errorf("the default pass: %+v, %v", d, err)
	}
	var fe kernels.FieldErrors
	if _, err := PlanPass("sideways", 8, 32, 8192, 64, instrument.DTypeF32, H100MemoryBytes); !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "pass" || !strings.Contains(fe[0].Message, "forward or backward") {
		t.Errorf("a bad pass: %v", err)
	}
}

// TestPlanAgainstLaunchPlans holds the calculator to the buffers the
// kernels it names allocate (launch.For), buffer by buffer, so that the two
// cannot drift apart: for each pass, dtype and head dim a kernel is compiled
// at, naive's N×N matrices (S, P, dP, dS) are NaiveNNBytes, a flash
// backward's D is FlashDeltaBytes, and every other buffer adds up to
// InputsBytes; a flash forward's kernel's shared memory (flash2's float32
// layout, flash2_mma's bf16 one), and a flash backward's main kernel's, is
// FlashTileByte. N = 384 is a whole number of naive_mma's kv-tiles (128 and
// 48), which it rounds P's rows up to.
func TestPlanAgainstLaunchPlans(t *testing.T) {
	t.Parallel()
	checked := map[string]bool{}
	for _, pass := range Passes {
		for _, dt := range []instrument.DType{instrument.DTypeF32, instrument.DTypeBF16} {
			for _, d := range []int{64, 128} {
				const b, h, n = 2, 3, 384
				p, err := PlanPass(pass, b, h, n, d, dt, H100MemoryBytes)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []struct {
					name  string
					total int64
					naive bool
				}{{p.NaiveKernel, p.NaiveBytes, true}, {p.FlashKernel, p.FlashBytes, false}} {
					if k.name == "" {
						if !k.naive || pass != PassBackward || dt != instrument.DTypeBF16 {
							t.Errorf("%s %s: the plan names no kernel (naive: %v), where one runs", pass, dt, k.naive)
						}
						continue
					}
					v, ok := instrument.ParseVariant(k.name)
					info := kernels.Info(v)
					if !ok || info == nil || info.Backward != (pass == PassBackward) || info.DType != dt {
						t.Fatalf("%s %s names %q, not a %s kernel of that pass", pass, dt, k.name, dt)
					}
					c := kernels.Config{Variant: v, N: n, D: d, Br: 32, Bc: 32, Batch: b, Heads: h}
					if tile, ok := info.SweepTile(d); ok {
						c.Br, c.Bc = tile.Br, tile.Bc
					}
					plan, err := launch.For(&c)
					if err != nil {
						t.Fatalf("%s at d=%d: %v", k.name, d, err)
					}
					var nn, delta, rest int64
					for buf, size := range plan.Buffers {
						switch kernels.Buffer(buf) {
						case kernels.BufS, kernels.BufP, kernels.BufDP, kernels.BufDS:
							nn += size
						case kernels.BufDelta:
							delta += size
						default:
							rest += size
						}
					}
					wantNN, wantDelta := p.NaiveNNBytes, int64(0)
					if !k.naive {
						wantNN, wantDelta = 0, p.FlashDeltaBytes
					}
					if nn != wantNN || delta != wantDelta || rest != p.InputsBytes || plan.DeviceBytes() != k.total {
						t.Errorf("%s d=%d: %s allocates N×N %d, D %d, the rest %d, %d in all; the calculator says %d, %d, %d, %d",
							pass, d, k.name, nn, delta, rest, plan.DeviceBytes(), wantNN, wantDelta, p.InputsBytes, k.total)
					}
					if !k.naive {
						main := 0 // the forward's one kernel; the backward's after its D
						if pass == PassBackward {
							main = 1
						}
						if shared := plan.Kernels[main].Shared; int64(shared) != p.FlashTileByte {
							t.Errorf("%s %s d=%d: %s takes %d bytes of shared memory, the calculator says %d", pass, dt, d, plan.Kernels[main].Name, shared, p.FlashTileByte)
						}
					}
					checked[k.name] = true
				}
			}
		}
	}
	if len(checked) != 7 {
		t.Errorf("checked %v: want naive, flash2, naive_mma, flash2_mma, naive_bwd, flash2_bwd and flash2_bwd_mma", checked)
	}
}
