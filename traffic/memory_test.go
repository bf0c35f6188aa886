package traffic

import (
	"math"
	"testing"

	"flashstep/instrument"
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
