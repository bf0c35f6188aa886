package kernels

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
)

// roleSlots evaluates warpspec.cuh's role_slots<TURNS> constants: each
// `name = expression` of its `static constexpr int` lines, where an
// expression is `TURNS ? a : b` or a sum of terms, a term a product of
// whole numbers and names defined before it.
func roleSlots(t *testing.T, src string, turns bool) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`(?s)struct role_slots \{(.*?)\n\};`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("warpspec.cuh has no struct role_slots")
	}
	vals := map[string]int{}
	var eval func(string) int
	eval = func(e string) int {
		e = strings.TrimSpace(e)
		if cond, rest, ok := strings.Cut(e, "?"); ok {
			a, b, _ := strings.Cut(rest, ":")
			if strings.TrimSpace(cond) != "TURNS" {
				t.Fatalf("role_slots: a condition %q", cond)
			}
			if turns {
				return eval(a)
			}
			return eval(b)
		}
		sum := 0
		for _, term := range strings.Split(e, "+") {
			p := 1
			for _, f := range strings.Split(term, "*") {
				f = strings.TrimSpace(f)
				if n, err := strconv.Atoi(f); err == nil {
					p *= n
				} else if v, ok := vals[f]; ok {
					p *= v
				} else {
					t.Fatalf("role_slots: %q is not defined before it is used", f)
				}
			}
			sum += p
		}
		return sum
	}
	for _, line := range regexp.MustCompile(`static constexpr int ([^;]*);`).FindAllStringSubmatch(m[1], -1) {
		for _, def := range regexp.MustCompile(`\s*(\w+)\s*=\s*([^,]+(?:\?[^:]+:[^,]+)?)`).FindAllStringSubmatch(line[1], -1) {
			vals[def[1]] = eval(def[2])
		}
	}
	return vals
}

// The kernels number their role records as kernels.RoleTable lists them:
// warpspec.cuh's role_slots gives each event its slot in a kv-tile's group
// (producer's first, then consumer c's at producer + c·consumer) and in
// the closing group; the worker writes each record's role and event from
// the table, so a slot that disagrees would label one span as another.
func TestRoleSlotsMatchSource(t *testing.T) {
	raw, err := os.ReadFile("cuda/hopper/warpspec.cuh")
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	names := map[instrument.Event]string{}
	for e := instrument.EventCopyQ; e <= instrument.EventClock; e++ {
		names[e] = e.String()
	}
	for _, table := range []*RoleTable{wsRoles, pingPongRoles} {
		s := roleSlots(t, src, table.Turns)
		if s["per_tile"] != len(table.PerTile) {
			t.Errorf("turns %t: role_slots has %d slots a kv-tile, the table %d", table.Turns, s["per_tile"], len(table.PerTile))
		}
		for k, slot := range table.PerTile {
			want := s[names[slot.Event]]
			if slot.Role.Consumer() {
				want += s["producer"] + int(slot.Role-instrument.RoleConsumer0)*s["consumer"]
			}
			if k != want {
				t.Errorf("turns %t: the table's slot %d is %s's %s, which role_slots puts at %d", table.Turns, k, slot.Role, slot.Event, want)
			}
		}
		clocks := 0
		for k, slot := range table.PerBlock {
			var want int
			switch slot.Event {
			case instrument.EventClock:
				want = s[[]string{"clock_start", "clock_end"}[clocks]]
				clocks++
			case instrument.EventWaitQ, instrument.EventEpilogue:
				want = s[names[slot.Event]] + int(slot.Role-instrument.RoleConsumer0)
			default:
				want = s[names[slot.Event]]
			}
			if k != want {
				t.Errorf("turns %t: the table's closing slot %d is %s's %s, which role_slots puts at %d", table.Turns, k, slot.Role, slot.Event, want)
			}
		}
	}
}
