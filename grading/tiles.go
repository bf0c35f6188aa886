package grading

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Tiles asks for a set of tiles on a grid of Rows q-tiles by Cols
// kv-tiles, graded right when it is exactly Key.Tiles. A tile is written
// "i,j" (q-tile i, kv-tile j), tiles are separated by ; or spaces, and
// "none" is the empty set.
type Tiles struct {
	Key        Solution
	Rows, Cols int
	// WrongHint is every wrong set's hint, the same whatever was marked:
	// a hint that counted the tiles wrongly marked or missed would let a
	// student read the answer off one tile at a time. "": "Not quite."
	WrongHint string
	AddedHint string // follows every wrong answer's hint
	Widget    string // the widget whose step Key.Step is
}

// Grade judges answer against q.Key.
func (q *Tiles) Grade(answer string, reveal bool) Verdict {
	v, answer, done := begin(answer, reveal, q.Key, q.Widget, "Mark the tiles first (or submit “none” if you think no tile is skipped).")
	if done {
		return v
	}
	picked, why := q.Read(answer)
	if why != "" {
		return invalid(v, why)
	}
	if slices.Equal(picked, q.Key.Tiles) {
		return right(v, q.Key)
	}
	hint := q.WrongHint
	if hint == "" {
		hint = notQuite
	}
	return wrong(v, hint, q.AddedHint)
}

// Read is the set of tiles an answer marks, sorted and each once, or why
// it is none.
func (q *Tiles) Read(answer string) ([]string, string) {
	answer = strings.TrimSpace(answer)
	if strings.EqualFold(answer, "none") {
		return nil, ""
	}
	var out []string
	for _, tile := range strings.FieldsFunc(answer, func(r rune) bool { return r == ';' || r == ' ' }) {
		if !q.onGrid(tile) {
			return nil, fmt.Sprintf("%q is not a tile of this %d×%d grid: write each tile as its q-tile and kv-tile, two whole numbers with a comma between, and put ; between tiles", truncate(tile), q.Rows, q.Cols)
		}
		if !slices.Contains(out, tile) {
			out = append(out, tile)
		}
	}
	slices.Sort(out)
	return out, ""
}

// onGrid says whether tile is a tile of the grid, written as the grid
// writes it ("1,2", not "01,2" or "1, 2"), so that one tile has one
// spelling in a set.
func (q *Tiles) onGrid(tile string) bool {
	is, js, ok := strings.Cut(tile, ",")
	i, ierr := strconv.Atoi(is)
	j, jerr := strconv.Atoi(js)
	return ok && ierr == nil && jerr == nil && i >= 0 && i < q.Rows && j >= 0 && j < q.Cols &&
		tile == strconv.Itoa(i)+","+strconv.Itoa(j)
}
