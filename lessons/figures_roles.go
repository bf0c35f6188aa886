package lessons

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"flashstep/instrument"
	"flashstep/recordings"
	"flashstep/roles"
)

// Figures read from a recorded roles trace (docs/ROLES.md), as tokens:
//
//	{{roles NAME softmax-hidden}}    the share of the consumers' softmax time that ran under a product of the other consumer: "16%"
//	{{roles NAME in-flight}}         the share of the blocks' time with a product of either consumer in flight
//	{{roles NAME softmax-together}}  the share of the consumers' softmax time during which the other consumer was in its softmax too
//	{{roles NAME softmax-share}}     the share of a consumer's time on its kv-tiles (waits, products, softmax) spent in its softmax
//	{{roles NAME turns}}             the share of the consumers' time spent waiting for a turn (rung 10)
//	{{roles NAME EVENT ns}}          the mean length in ns of a consumer's EVENT span on one kv-tile: softmax, product_s, product_pv, wait_k, wait_v
//
// NAME is the recording's name in recordings/list.txt (ws-roles). Shares
// are whole percentages, lengths whole ns; roles.Summarise computes the
// first two, roles.Union and roles.Overlap the third.

// rolesShares are the shares a roles figure names, in [0, 1].
var rolesShares = map[string]func(*rolesRecording) float64{
	"softmax-hidden":   func(r *rolesRecording) float64 { return r.shares.SoftmaxHidden },
	"in-flight":        func(r *rolesRecording) float64 { return r.shares.ProductsInFlight },
	"softmax-together": func(r *rolesRecording) float64 { return r.together },
	"softmax-share":    func(r *rolesRecording) float64 { return r.softmaxShare },
	"turns":            func(r *rolesRecording) float64 { return r.shares.Turns },
}

// rolesMeanEvents are the consumer spans whose mean length a figure may
// name: a consumer's spans of one kv-tile.
var rolesMeanEvents = []instrument.Event{instrument.EventWaitK, instrument.EventProductS, instrument.EventSoftmax, instrument.EventWaitV,
	instrument.EventProductPV, instrument.EventTurnS, instrument.EventTurnPV}

// rolesRecording is what the figures read of one recorded roles trace.
type rolesRecording struct {
	blocks       map[roles.Key]*roles.Block
	shares       roles.Shares
	together     float64
	softmaxShare float64
	mean         map[instrument.Event]float64 // ns, over every consumer's kv-tiles
}

var rolesRecordings sync.Map // name → func() (*rolesRecording, error)

// readRolesRecording reads recording name (recordings/NAME.fstrace), a roles
// trace, once.
func readRolesRecording(name string) (*rolesRecording, error) {
	f, _ := rolesRecordings.LoadOrStore(name, sync.OnceValues(func() (*rolesRecording, error) { return loadRolesRecording(name) }))
	return f.(func() (*rolesRecording, error))()
}

func loadRolesRecording(name string) (*rolesRecording, error) {
	raw, err := recordings.Files.ReadFile(name + ".fstrace")
	if err != nil {
		return nil, fmt.Errorf("no recording %q ships", name)
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	if !h.Roles {
		return nil, fmt.Errorf("recording %s is not a roles trace (mode=roles)", name)
	}
	r := &rolesRecording{blocks: roles.ByBlock(recs), mean: map[instrument.Event]float64{}}
	r.shares = roles.Summarise(r.blocks)
	var softmax, together, tiles uint64
	sum, n := map[instrument.Event]uint64{}, map[instrument.Event]int{}
	for _, b := range r.blocks {
		for _, c := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
			other := roles.Union(b.Select(func(x roles.Span) bool { return x.Role == roles.Other(c) && x.Event == instrument.EventSoftmax }))
			for _, s := range b.Select(func(x roles.Span) bool { return x.Role == c && x.J >= 0 && x.Event != instrument.EventClock }) {
				sum[s.Event] += s.Len()
				n[s.Event]++
				tiles += s.Len()
				if s.Event == instrument.EventSoftmax {
					softmax += s.Len()
					together += roles.Overlap(s.Start, s.End, other)
				}
			}
		}
	}
	if softmax == 0 {
		return nil, fmt.Errorf("recording %s holds no consumer softmax", name)
	}
	r.together = float64(together) / float64(softmax)
	r.softmaxShare = float64(softmax) / float64(tiles)
	for e, s := range sum {
		r.mean[e] = float64(s) / float64(n[e])
	}
	return r, nil
}

// rolesFigure is the value of a roles token (without its braces),
// unrounded: a share in [0, 1] or a mean length in ns; percent says which.
func rolesFigure(tok string) (v float64, percent bool, err error) {
	words := strings.Fields(tok)
	if len(words) < 3 || words[0] != "roles" {
		return 0, false, fmt.Errorf("a roles figure is {{roles NAME SHARE}} or {{roles NAME EVENT ns}}, got %q", tok)
	}
	r, err := readRolesRecording(words[1])
	if err != nil {
		return 0, false, err
	}
	if len(words) == 3 {
		share, ok := rolesShares[words[2]]
		if !ok {
			return 0, false, fmt.Errorf("unknown share %q: softmax-hidden, in-flight, softmax-together, softmax-share or turns", words[2])
		}
		return share(r), true, nil
	}
	if len(words) != 4 || words[3] != "ns" {
		return 0, false, fmt.Errorf("a span's mean length is {{roles NAME EVENT ns}}, got %q", tok)
	}
	var names []string
	for _, e := range rolesMeanEvents {
		names = append(names, e.String())
		if e.String() == words[2] {
			m, ok := r.mean[e]
			if !ok {
				return 0, false, fmt.Errorf("recording %s has no %s spans", words[1], words[2])
			}
			return m, false, nil
		}
	}
	return 0, false, fmt.Errorf("unknown consumer span %q: %s", words[2], strings.Join(names, ", "))
}

// rolesText is a roles figure as a lesson shows it.
func rolesText(tok string) (string, error) {
	v, percent, err := rolesFigure(tok)
	if err != nil {
		return "", err
	}
	if percent {
		return fmt.Sprintf("%.0f%%", 100*v), nil
	}
	return fmt.Sprintf("%.0f", v), nil
}
