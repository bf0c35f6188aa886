package lessons_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
)

// Lesson 15's claims, each held to what it comes from: the measured
// figures to docs/DECODE.md's table of the run the lesson names (an H200,
// 2026-11-28), the arithmetic to the rules it states, the widgets' words to
// their runs' traces, and the rungs' sizes to the registry. A measured
// decoding figure is typed in the lesson (TB/s are not TFLOP/s: no figure
// token reads the decode worklog), so this test is what keeps it true: when
// the decode bench is run again and docs/DECODE.md's table changes, it
// fails here, naming the figures to bring up to date.

// decodeRow is one shape of docs/DECODE.md's split-KV table, as written.
type decodeRow struct {
	hkv, b, n            int
	splits               int
	split, ratio, group  string // decode_split's TB/s, over the read-only kernel, decode_group's TB/s
	sdpaFlash, sdpaCuDNN string
	overBandwidth        string // decode_split over bandwidth.cu's read-only kernel at the cache's size
	// SDPA's backends over the read-only kernel in their own process, and
	// decode_split's share over each of theirs.
	flashShare, cuDNNShare, overFlash, overCuDNN string
}

// decodeDoc is docs/DECODE.md, folded, and its split-KV table: the first
// whose header begins "| Hkv | B | N | splits | decode_split |", its
// columns found by their names; and the run the "Speed" paragraph above it
// names.
func decodeDoc(t *testing.T) (doc string, run string, rows []decodeRow) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "DECODE.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| Hkv | B | N | splits | decode_split |") })
	if at < 0 {
		t.Fatal("docs/DECODE.md has no split-KV table (| Hkv | B | N | splits | decode_split | …): check lesson 15's figures against what it has now")
	}
	var head []string
	for _, c := range strings.Split(strings.Trim(lines[at], "| "), "|") {
		head = append(head, strings.TrimSpace(c))
	}
	col := func(name string) int {
		k := slices.Index(head, name)
		if k < 0 {
			t.Fatalf("docs/DECODE.md's split-KV table has no column %q (it has %v)", name, head)
		}
		return k
	}
	cols := map[string]int{}
	for _, name := range []string{"Hkv", "B", "N", "splits", "decode_split", "× read-only", "decode_group", "SDPA FA2", "SDPA cuDNN", "× bandwidth.cu",
		"FA2 × read-only", "cuDNN × read-only", "× FA2", "× cuDNN"} {
		cols[name] = col(name)
	}
	keys := func(s string) int {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "k"))
		if err != nil {
			t.Fatalf("docs/DECODE.md's split-KV table: keys %q", s)
		}
		if strings.HasSuffix(s, "k") {
			n *= 1024
		}
		return n
	}
	for _, l := range lines[at+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		var c []string
		for _, x := range strings.Split(strings.Trim(l, "| "), "|") {
			c = append(c, strings.TrimSpace(x))
		}
		if len(c) != len(head) {
			t.Fatalf("docs/DECODE.md's split-KV table: %q has %d cells, its header %d", l, len(c), len(head))
		}
		r := decodeRow{n: keys(c[cols["N"]]), split: c[cols["decode_split"]], ratio: c[cols["× read-only"]], group: c[cols["decode_group"]],
			sdpaFlash: c[cols["SDPA FA2"]], sdpaCuDNN: c[cols["SDPA cuDNN"]], overBandwidth: c[cols["× bandwidth.cu"]],
			flashShare: c[cols["FA2 × read-only"]], cuDNNShare: c[cols["cuDNN × read-only"]], overFlash: c[cols["× FA2"]], overCuDNN: c[cols["× cuDNN"]]}
		for name, p := range map[string]*int{"Hkv": &r.hkv, "B": &r.b, "splits": &r.splits} {
			if *p, err = strconv.Atoi(c[cols[name]]); err != nil {
				t.Fatalf("docs/DECODE.md's split-KV table: %q: %s", l, name)
			}
		}
		rows = append(rows, r)
	}
	m := regexp.MustCompile("Speed, `scripts/bench-decode` \\(run (\\w+): NVIDIA H200, driver 580\\.159\\.04").FindAllStringSubmatch(prose(strings.Join(lines[:at], "\n")), -1)
	if m == nil {
		t.Fatal("docs/DECODE.md names no run (\"Speed, `scripts/bench-decode` (run XX: NVIDIA H200, driver 580.159.04\") above its split-KV table")
	}
	return prose(string(raw)), m[len(m)-1][1], rows
}

func decodeRowOf(t *testing.T, rows []decodeRow, hkv, b, n int) decodeRow {
	t.Helper()
	i := slices.IndexFunc(rows, func(r decodeRow) bool { return r.hkv == hkv && r.b == b && r.n == n })
	if i < 0 {
		t.Fatalf("docs/DECODE.md's split-KV table has no Hkv=%d, B=%d, N=%d: lesson 15 quotes it", hkv, b, n)
	}
	return rows[i]
}

// num2 is a figure as the table writes it.
func num2(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is no figure", s)
	}
	return v
}

var cellNumber = regexp.MustCompile(`[\d,]+(?:\.\d+)?`)

// TestClaimDecodeTable: lesson 15's table names the run docs/DECODE.md's
// split-KV table is of, and every cell is that table's figure for its
// shape as written there (decode_group's and decode_split's TB/s,
// decode_split's splits and its share of the read-only kernel's rate,
// SDPA's two backends), the cache its size by the lesson's formula, and the
// splits the rule the lesson teaches.
func TestClaimDecodeTable(t *testing.T) {
	t.Parallel()
	_, run, rows := decodeDoc(t)
	src := lessonSource(t, "15-inference.md")
	if !strings.Contains(prose(src), "docs/DECODE.md's run "+run+")") {
		t.Errorf("docs/DECODE.md's split-KV table is run %s's; lesson 15 quotes another run: bring its table and the figures after it up to date", run)
	}
	checked := 0
	for _, line := range strings.Split(src, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if !strings.HasPrefix(line, "| ") || len(cells) != 9 {
			continue
		}
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		hkv, err1 := strconv.Atoi(cells[0])
		b, err2 := strconv.Atoi(cells[1])
		n, err3 := strconv.Atoi(strings.ReplaceAll(cells[2], ",", ""))
		if err1 != nil || err2 != nil || err3 != nil {
			continue // the heading
		}
		r := decodeRowOf(t, rows, hkv, b, n)
		checked++
		split := cellNumber.FindAllString(cells[5], -1)
		if len(split) != 2 {
			t.Fatalf("Hkv=%d, B=%d, N=%d: lesson 15's cell %q wants a figure and the splits in brackets", hkv, b, n, cells[5])
		}
		for _, w := range []struct{ lesson, doc, what string }{
			{cells[4], r.group, "decode_group's TB/s"},
			{split[0], r.split, "decode_split's TB/s"},
			{split[1], strconv.Itoa(r.splits), "decode_split's splits"},
			{cells[6], r.ratio, "decode_split over the read-only kernel"},
			{cells[7], r.sdpaFlash, "SDPA FlashAttention-2's TB/s"},
			{cells[8], r.sdpaCuDNN, "SDPA cuDNN's TB/s"},
		} {
			if w.lesson != w.doc {
				t.Errorf("%s at Hkv=%d, B=%d, N=%d: lesson 15's table says %s, docs/DECODE.md's run %s %s", w.what, hkv, b, n, w.lesson, run, w.doc)
			}
		}
		bytes := float64(lessons.KVCacheBytes(1, hkv, n, 128, 2, b)) // one layer's K and V in bf16, d = 128
		cache, unit := bytes/1e6, "MB"
		if strings.HasSuffix(cells[3], "GB") {
			cache, unit = bytes/1e9, "GB"
		}
		if c := cellNumber.FindString(cells[3]); !within(c, cache) {
			t.Errorf("the cache at Hkv=%d, B=%d, N=%d: the table says %s, the formula %.4g %s", hkv, b, n, cells[3], cache, unit)
		}
		cfg := kernels.Config{Variant: instrument.VariantDecodeSplit, N: n, Nq: 1, Br: 1, Bc: 64, D: 128, Batch: b, Heads: 32, KVHeads: hkv}
		if s, _ := kernels.DecodeSplits(&cfg); s != r.splits {
			t.Errorf("Hkv=%d, B=%d, N=%d: kernels.DecodeSplits gives %d splits, the run ran %d", hkv, b, n, s, r.splits)
		}
	}
	if checked < 5 {
		t.Errorf("checked %d rows of lesson 15's table; it has five", checked)
	}
}

// within says whether written, a number as the lesson writes it, is raw
// rounded to written's decimals (half a unit of its last digit, either way
// where raw sits on the half).
func within(written string, raw float64) bool {
	v, err := strconv.ParseFloat(strings.ReplaceAll(written, ",", ""), 64)
	if err != nil {
		return false
	}
	dec := 0
	if _, frac, ok := strings.Cut(written, "."); ok {
		dec = len(frac)
	}
	return math.Abs(v-raw) <= 0.5*math.Pow(10, -float64(dec))+1e-9
}

// TestClaimDecodeProse: every figure with two decimals the lesson's prose
// quotes is a cell of its table (held to docs/DECODE.md above) or one of
// the few it derives, checked here; and what it says of those figures, and
// quotes from docs/DECODE.md outside the table, is what they and it say.
func TestClaimDecodeProse(t *testing.T) {
	t.Parallel()
	doc, _, rows := decodeDoc(t)
	src := lessonSource(t, "15-inference.md")
	var table []string
	var body strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(line, "| ") {
			table = append(table, cellNumber.FindAllString(line, -1)...)
			continue
		}
		body.WriteString(line + "\n")
	}
	text := body.String()
	text = regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(text, "")      // figures read from a trace
	text = regexp.MustCompile(`(?s)^---.*?\n---\n`).ReplaceAllString(text, "") // the front matter
	text = strings.ReplaceAll(text, "580.159.04", "")                          // the driver's version
	derived := map[string]string{
		"3.35": "the H100's HBM3, NVIDIA's datasheet (lesson 11)",
		"1.28": "4 GiB at 3.35 TB/s, checked below",
		"0.85": "docs/DECODE.md's goal, checked below",
		"3.62": "docs/DECODE.md's baseline, checked below",
		"0.97": "the paged bench's slowest shape, TestClaimPagedCost",
		"1.04": "the paged bench's fastest shape, TestClaimPagedCost",
		"0.99": "the split kernel's copies alone against the read-only kernel, TestClaimDecodeParts",
		"1.01": "the copy walks' slowest against the read-only kernel, TestClaimDecodeParts",
		"1.02": "the copy walks' fastest, TestClaimDecodeParts",
		"1.08": "decode_split's share over FlashAttention-2's at batch 1, 32 K/V heads, checked below",
		"0.94": "decode_split's share over cuDNN's there, checked below",
	}
	for _, m := range regexp.MustCompile(`\d+\.\d\d\b`).FindAllString(text, -1) {
		if slices.Contains(table, m) || derived[m] != "" {
			continue
		}
		t.Errorf("lesson 15 quotes %s, which is no cell of its table and no figure this test checks", m)
	}
	small, long, big, wide := decodeRowOf(t, rows, 8, 1, 32768), decodeRowOf(t, rows, 8, 1, 131072), decodeRowOf(t, rows, 8, 64, 32768), decodeRowOf(t, rows, 32, 1, 32768)
	folded := prose(src)
	says := func(sentence string) {
		t.Helper()
		if !strings.Contains(folded, sentence) {
			t.Errorf("lesson 15 no longer says %q: check the claim it makes instead here", sentence)
		}
	}
	quotes := func(sentence string) {
		t.Helper()
		if !strings.Contains(doc, sentence) {
			t.Errorf("docs/DECODE.md no longer says %q, which lesson 15 quotes: bring the lesson up to date", sentence)
		}
	}
	// The read-only kernel: the baseline's figures.
	says("the device reads 4.5 TB/s once a buffer is a few GiB, but only 3.62 TB/s on 134 MB, the cache of 8 K/V heads at 32,768 keys")
	quotes("The device reads 4.5 TB/s once a buffer is a few GiB")
	quotes("at 134 MB a kernel that only reads gets 3.62 TB/s, the launch and the last wave's tail being a larger share")
	quotes("NVIDIA H200 (132 SMs")
	quotes("median of 20")
	if !within("134", float64(lessons.KVCacheBytes(1, 8, 32768, 128, 2, 1))/1e6) {
		t.Error("the cache of 8 K/V heads at 32,768 keys is not 134 MB")
	}
	// decode_group's grid: a block per (sequence, K/V head) at one query
	// row, on the rung's 132 SMs.
	says("At batch 1 with 8 K/V heads that is 8 blocks, and an H100 SXM or an H200 has 132 SMs: 124 of them have nothing to do")
	says("`decode_group` read 0.20 TB/s at 32,768 keys. At batch 64 the same kernel has 512 blocks, and it read 4.54 TB/s, level with `decode_split`'s 4.54, which is 0.98 of what the read-only kernel reads on those bytes")
	if kernels.DecodeSMs != 132 || kernels.DecodeSMs-8 != 124 || 64*8 != 512 || small.group != "0.20" || big.group != "4.54" || big.split != "4.54" || big.ratio != "0.98" ||
		math.Abs(num2(t, big.group)/num2(t, big.split)-1) > 0.01 {
		t.Errorf("decode_group: %s TB/s at batch 1, %s at batch 64 beside decode_split's %s (%s of the read-only kernel)", small.group, big.group, big.split, big.ratio)
	}
	// The rungs' sizes the lesson gives.
	says("one 16-row tensor-core tile")
	says("three kv-tiles in flight")
	if kernels.DecodeAtomRows != 16 || kernels.DecodeStages != 3 {
		t.Errorf("decode_group packs %d rows and keeps %d kv-tiles in flight; the lesson says 16 and three", kernels.DecodeAtomRows, kernels.DecodeStages)
	}
	// The split rule's worked example.
	says("132 SMs with two of its blocks each, 264 blocks")
	says("$264 / 8 = 33$ splits' room over 512 kv-tiles; each split takes $\\lceil 512 / 33 \\rceil = 16$ kv-tiles, and 512 kv-tiles in runs of 16 make 32 splits, 256 blocks")
	cfg := kernels.Config{Variant: instrument.VariantDecodeSplit, N: 32768, Nq: 1, Br: 1, Bc: 64, D: 128, Batch: 1, Heads: 32, KVHeads: 8}
	if s, per := kernels.DecodeSplits(&cfg); kernels.DecodeSMs*kernels.DecodeBlocksPerSM != 264 || s != 32 || per != 16 || cfg.Tc() != 512 || s*8 != 256 {
		t.Errorf("at batch 1, 8 K/V heads, 32,768 keys: %d splits of %d kv-tiles; the lesson says 32 of 16", s, per)
	}
	// What splitting buys at batch 1, and what it misses.
	says("splitting takes the same kernel from 0.20 to 2.83 TB/s at 32,768 keys, ahead of SDPA's FlashAttention backend there (2.70) and behind its cuDNN backend (3.31). It is not the ceiling: 0.79 of what the read-only kernel reads on those bytes, short of the 0.85 the work set itself, which it passes at 131,072 keys (0.89)")
	says("With 32 K/V heads at batch 1 it passes it too (0.89) and is behind both (3.73 and 4.27 against 3.52)")
	// By the same-moment shares, the fairer comparison the lesson then gives.
	says("`decode_split` is ahead of the FlashAttention backend there too, 1.08 times, and still behind cuDNN's, 0.94 times")
	if wide.overFlash != "1.08" || wide.overCuDNN != "0.94" {
		t.Errorf("batch 1, 32 K/V heads: decode_split's share over SDPA's %s and %s; the lesson says 1.08 and 0.94", wide.overFlash, wide.overCuDNN)
	}
	says("At batch 64 one split is all the rule gives, and the two rungs read alike, near the device's whole rate, a step behind cuDNN")
	quotes("≥ 85% of the read bandwidth")
	if small.group != "0.20" || small.split != "2.83" || small.sdpaFlash != "2.70" || small.sdpaCuDNN != "3.31" ||
		num2(t, small.split) <= num2(t, small.sdpaFlash) || num2(t, small.split) >= num2(t, small.sdpaCuDNN) ||
		small.ratio != "0.79" || num2(t, small.ratio) >= 0.85 || long.ratio != "0.89" || num2(t, long.ratio) < 0.85 {
		t.Errorf("decode_split at batch 1, 8 K/V heads: %s TB/s (SDPA %s, %s), %s of the read-only kernel; %s at 131,072 keys", small.split, small.sdpaFlash, small.sdpaCuDNN, small.ratio, long.ratio)
	}
	if wide.sdpaFlash != "3.73" || wide.sdpaCuDNN != "4.27" || wide.split != "3.52" || wide.ratio != "0.89" || num2(t, wide.ratio) < 0.85 ||
		num2(t, wide.split) >= min(num2(t, wide.sdpaFlash), num2(t, wide.sdpaCuDNN)) {
		t.Errorf("batch 1, 32 K/V heads: FlashAttention-2 %s, cuDNN %s, decode_split %s", wide.sdpaFlash, wide.sdpaCuDNN, wide.split)
	}
	if big.splits != 1 || math.Abs(num2(t, big.group)/num2(t, big.split)-1) > 0.01 || num2(t, big.split) >= num2(t, big.sdpaCuDNN) {
		t.Errorf("batch 64: %d splits, %s and %s TB/s, cuDNN %s", big.splits, big.group, big.split, big.sdpaCuDNN)
	}
	// The earlier timings' error the lesson names, from the raw files of
	// run bb (SDPA timed with Python's launch inside).
	says("Earlier runs did neither, and had `decode_split` 1.2 to 2.7 times as fast as cuDNN at batch 1 with 8 K/V heads up to 32,768 keys")
	if lo, hi := earlierCuDNNLead(t); fmt.Sprintf("%.1f %.1f", lo, hi) != "1.2 2.7" {
		t.Errorf("run bb had decode_split %.2f to %.2f times cuDNN at batch 1, 8 K/V heads, up to 32k keys; lesson 15 says 1.2 to 2.7", lo, hi)
	}
	says("the H200 (132 SMs, driver 580.159.04, 2026-11-28, docs/DECODE.md's run")
	// Grouped heads, measured: the time of the two caches at their rates.
	says("`decode_split` read the 134 MB of 8 K/V heads at 2.83 TB/s, about 47 µs, and the 537 MB of 32 at 3.52 TB/s, about 153 µs: three times faster for a quarter of the bytes")
	bytes := func(hkv int) float64 { return float64(lessons.KVCacheBytes(1, hkv, 32768, 128, 2, 1)) }
	t8, t32 := bytes(8)/(num2(t, small.split)*1e12)*1e6, bytes(32)/(num2(t, wide.split)*1e12)*1e6
	if math.Abs(t8-47) > 0.5 || math.Abs(t32-153) > 0.5 || t32/t8 < 2.5 || t32/t8 >= 3.5 || bytes(32) != 4*bytes(8) || !within("537", bytes(32)/1e6) {
		t.Errorf("decode_split at batch 1, 32,768 keys: %.3g µs over 8 K/V heads, %.3g µs over 32", t8, t32)
	}
}

// TestClaimDecodeArithmetic: the KV cache's and the one-token query's
// arithmetic the lesson works out, and the ridge points it quotes.
func TestClaimDecodeArithmetic(t *testing.T) {
	t.Parallel()
	folded := prose(lessonSource(t, "15-inference.md"))
	says := func(sentence string) {
		t.Helper()
		if !strings.Contains(folded, sentence) {
			t.Errorf("lesson 15 no longer says %q: check the claim it makes instead here", sentence)
		}
	}
	const layers, hq, hkv, d, tokens = 32, 32, 8, 128, 32768
	says("A model of 32 layers whose 32 query heads share 8 K/V heads of $d = 128$, in bf16, keeps $2 \\cdot 32 \\cdot 8 \\cdot 128 \\cdot 2 = 131{,}072$ bytes a token")
	if lessons.KVCacheBytes(layers, hkv, 1, d, 2, 1) != 131072 {
		t.Error("a token's cache is not 131,072 bytes")
	}
	says("= 4,294,967,296 bytes, 4 GiB, for one sequence. Sixteen such sequences served at once hold 64 GiB, most of an H100's 80 GB")
	one := lessons.KVCacheBytes(layers, hkv, tokens, d, 2, 1)
	if one != 4294967296 || 4294967296 != 4<<30 || lessons.KVCacheBytes(layers, hkv, tokens, d, 2, 16) != 64<<30 || float64(64<<30) < 0.5*80e9 || float64(64<<30) > 80e9 {
		t.Errorf("the example's cache: %d bytes", one)
	}
	says("would keep 16 GiB a sequence at 32,768 tokens without grouping, and keeps 4 GiB with 8 K/V heads")
	if lessons.KVCacheBytes(layers, hq, tokens, d, 2, 1) != 16<<30 {
		t.Error("the example without grouping is not 16 GiB")
	}
	says("1 FLOP a byte when every query head has its own K and V, 4 with 32 query heads over 8")
	says("from 1 to 4 FLOPs a byte")
	if lessons.DecodeIntensity(hq, hq, 2) != 1 || lessons.DecodeIntensity(hq, hkv, 2) != 4 {
		t.Error("the intensities 1 and 4")
	}
	says("$989.4 / 3.35 \\approx 295$ FLOPs a byte")
	says("989.4 TFLOP/s with 4.8 TB/s of HBM3e, a ridge near 206")
	if math.Round(lessons.TensorPeakFLOPs/lessons.HBMBytesPerSec) != 295 || math.Round(lessons.TensorPeakFLOPs/4.8e12) != 206 {
		t.Errorf("ridge points %g and %g", lessons.TensorPeakFLOPs/lessons.HBMBytesPerSec, lessons.TensorPeakFLOPs/4.8e12)
	}
	says("the attention of one step, over all 32 layers, reads 4 GiB and does about 17.2 GFLOP: at least 1.28 ms at 3.35 TB/s, against 17 µs at 989.4 TFLOP/s")
	says("Decoding sits some 50 to 300 times under either")
	if lo, hi := lessons.TensorPeakFLOPs/4.8e12/lessons.DecodeIntensity(hq, hkv, 2), lessons.TensorPeakFLOPs/lessons.HBMBytesPerSec/lessons.DecodeIntensity(hq, hq, 2); lo < 50 || lo > 55 || hi < 290 || hi > 300 {
		t.Errorf("decoding sits %g to %g times under the ridge points; the lesson says some 50 to 300", lo, hi)
	}
	flops := 4.0 * hq * tokens * d * layers
	if !within("17.2", flops/1e9) || !within("1.28", float64(one)/lessons.HBMBytesPerSec*1e3) || !within("17", flops/lessons.TensorPeakFLOPs*1e6) {
		t.Errorf("%g GFLOP, %g ms, %g µs", flops/1e9, float64(one)/lessons.HBMBytesPerSec*1e3, flops/lessons.TensorPeakFLOPs*1e6)
	}
	says("Lesson 11's arithmetic applies to it, $N/2$ FLOPs for each compulsory byte")
	// The glossary's wave is the rung's.
	if w, ok := lessons.GlossaryTerm("wave"); !ok || !strings.Contains(w.Meaning, fmt.Sprintf("%d × %d", kernels.DecodeSMs, kernels.DecodeBlocksPerSM)) {
		t.Errorf("the glossary's wave %q does not say %d × %d", w.Meaning, kernels.DecodeSMs, kernels.DecodeBlocksPerSM)
	}
}

// TestClaimDecodeWidgets: what lesson 15's captions say of their runs is
// what the runs' traces hold.
func TestClaimDecodeWidgets(t *testing.T) {
	t.Parallel()
	folded := prose(lessonSource(t, "15-inference.md"))
	says := func(sentence string) {
		t.Helper()
		if !strings.Contains(folded, sentence) {
			t.Errorf("lesson 15 no longer says %q: check the claim it makes instead here", sentence)
		}
	}
	cfg := func(preset string) kernels.Config { return mustConfig(t, lessons.Runs[preset].Query) }
	r := engines(t)
	// The first widget.
	says("one query row for each of 4 query heads, against $N = 256$ cached keys in four kv-tiles of 64, $d = 64$")
	g := cfg("decode-group")
	if g.Queries() != 1 || g.Heads != 4 || g.KVHeadCount() != 1 || g.N != 256 || g.Tc() != 4 || g.Bc != 64 || g.D != 64 {
		t.Errorf("decode-group is %s", g.Key())
	}
	// The chunk: its rows' positions.
	says("48 new query rows against $N = 128$ keys, causal, in tiles of 8 rows by 16 keys: query rows 0 to 47 are positions 80 to 127")
	ch := cfg("decode-chunk-causal")
	if ch.Queries() != 48 || ch.N != 128 || !ch.Causal || ch.Br != 8 || ch.Bc != 16 || ch.QueryOffset() != 80 || ch.QueryOffset()+47 != 127 {
		t.Errorf("decode-chunk-causal is %s", ch.Key())
	}
	// The split run: step 3 is split 1's fresh start, step 2 split 0's end,
	// and head 0's merges come after every head's split ends.
	says("`decode_split` on the run of the first widget: 4 kv-tiles, so 4 splits of one kv-tile each. Step 3 is split 1's only kv-tile, for head 0: the rows table shows $m_{\\text{old}} = -\\infty$, a fresh start, though kv-tile 0 came before it. Step 2 was split 0's end; the merges of head 0 come once every head's splits have ended.")
	sp := cfg("decode-split")
	if s, per := kernels.DecodeSplits(&sp); s != 4 || per != 1 {
		t.Errorf("decode-split makes %d splits of %d", s, per)
	}
	if sg := g; sg.Variant != instrument.VariantDecodeGroup || func() bool { sg.Variant = sp.Variant; return sg.Key() != sp.Key() }() {
		t.Errorf("decode-split (%s) is not decode-group's run (%s)", sp.Key(), g.Key())
	}
	st := traceOf(t, r, sp).Steps
	if s3 := st[2]; s3.Kind != instrument.KindFlashStep || s3.BH != 0 || s3.J != 1 || !math.IsInf(float64(s3.MOld[0]), -1) {
		t.Errorf("step 3 is %s of head %d at kv-tile %d, m_old %g", kindName(s3.Kind), s3.BH, s3.J, s3.MOld[0])
	}
	if s2 := st[1]; s2.Kind != instrument.KindSplitEnd || s2.BH != 0 || s2.J != 0 {
		t.Errorf("step 2 is %s of head %d, split %d", kindName(s2.Kind), s2.BH, s2.J)
	}
	firstMerge := slices.IndexFunc(st, func(x *instrument.Record) bool { return x.Kind == instrument.KindMerge })
	lastEnd := -1
	for k, x := range st {
		if x.Kind == instrument.KindSplitEnd {
			lastEnd = k
		}
	}
	if firstMerge < lastEnd || st[firstMerge].BH != 0 {
		t.Errorf("head 0's first merge is step %d, the last split end step %d", firstMerge+1, lastEnd+1)
	}
	// The merge run: two splits; split 0's end at step 2, split 1's at 4,
	// head 0's merges and epilogue at steps 17 to 19.
	says("`decode_split` on $N = 128$ keys, two kv-tiles of 64 and so two splits, 4 query heads over 1 K/V head, $d = 32$. Step 2 is split 0's end for head 0")
	says("before stepping to the merge (steps 17 to 19)")
	says("split 1's end is step 4")
	m := cfg("decode-merge")
	if s, _ := kernels.DecodeSplits(&m); s != 2 || m.N != 128 || m.Bc != 64 || m.Heads != 4 || m.KVHeadCount() != 1 || m.D != 32 {
		t.Errorf("decode-merge is %s, %d splits", m.Key(), s)
	}
	mt := traceOf(t, r, m).Steps
	at := func(step int, kind instrument.Kind, j int) {
		t.Helper()
		if x := mt[step-1]; x.Kind != kind || x.BH != 0 || x.J != j {
			t.Errorf("the merge run's step %d is %s of head %d, j %d; the lesson says %s, j %d", step, kindName(x.Kind), x.BH, x.J, kindName(kind), j)
		}
	}
	at(2, instrument.KindSplitEnd, 0)
	at(4, instrument.KindSplitEnd, 1)
	at(17, instrument.KindMerge, 0)
	at(18, instrument.KindMerge, 1)
	at(19, instrument.KindEpilogue, -1)
	if w := widgetByID(lessonBySlug(t, "inference"), "merge-run"); w == nil || w.Step != 2 {
		t.Error("the merge widget does not open on step 2, split 0's end")
	}
	// The bytes: head 0's steps each read K_j and V_j, 8,192 bytes; head
	// 1's first step only its query row.
	says("Head 0's four steps each added $K_j$ and $V_j$, $2 \\cdot 64 \\cdot 64 \\cdot 2 = 16{,}384$ bytes; head 1's step adds only its query row.")
	gt := traceOf(t, r, g).Steps
	kv := uint64(2 * g.Bc * g.D * 2)
	qrow := uint64(g.D * 2)
	if kv != 16384 {
		t.Errorf("K_j and V_j are %d bytes", kv)
	}
	for k := range 4 {
		if x := gt[k]; x.Kind != instrument.KindFlashStep || x.BH != 0 || x.BytesRead < kv || x.BytesRead-kv > qrow {
			t.Errorf("step %d (%s, head %d) read %d bytes; the lesson says head 0's steps each add K_j and V_j, %d", k+1, kindName(x.Kind), x.BH, x.BytesRead, kv)
		}
	}
	if x := gt[5]; x.Kind != instrument.KindFlashStep || x.BH != 1 || x.J != 0 || x.BytesRead != qrow {
		t.Errorf("step 6 is %s of head %d at kv-tile %d, reading %d bytes; the lesson says head 1's first step reads only its query row, %d", kindName(x.Kind), x.BH, x.J, x.BytesRead, qrow)
	}
	if w := widgetByID(lessonBySlug(t, "inference"), "group-bytes"); w == nil || w.Step != 6 {
		t.Error("the bytes widget does not open on step 6")
	}
}

func lessonBySlug(t *testing.T, slug string) *lessons.Lesson {
	t.Helper()
	l, ok := course(t).Lesson(slug)
	if !ok {
		t.Fatalf("no lesson %q", slug)
	}
	return l
}

// TestClaimPagedCost: what lesson 15 says a paged cache costs is the
// paged bench's raw file (docs/ladder-runs, run on the H200): its shapes,
// the lowest and highest of decode_paged's speed over decode_split's, and
// every shape's output equal bit for bit; and the widget's run is what
// the lesson says (two sequences, a pool of 16 pages, 8 a sequence, each
// kv-tile a split of its own).
func TestClaimPagedCost(t *testing.T) {
	t.Parallel()
	const file = "2026-11-28-decode-paged-au-paged-bench.txt"
	raw, err := os.ReadFile(filepath.Join("..", "docs", "ladder-runs", file))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, shapes := math.Inf(1), math.Inf(-1), 0
	var batches, keys []int
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 13 || f[0] == "B" {
			continue
		}
		b, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[1])
		ratio, err := strconv.ParseFloat(f[11], 64)
		if err != nil || b == 0 || n == 0 {
			t.Fatalf("%s: %q is no row of the table", file, line)
		}
		if f[12] != "yes" {
			t.Errorf("%s: B=%d N=%d: the outputs differ; the lesson says they are equal", file, b, n)
		}
		lo, hi, shapes = min(lo, ratio), max(hi, ratio), shapes+1
		batches, keys = append(batches, b), append(keys, n)
	}
	folded := prose(lessonSource(t, "15-inference.md"))
	says := func(sentence string) {
		t.Helper()
		if !strings.Contains(folded, sentence) {
			t.Errorf("lesson 15 no longer says %q: check the claim it makes instead here", sentence)
		}
	}
	says("15 shapes: batch 1, 8 and 64, 4,096 to 131,072 keys, 8 and 32 K/V heads), `decode_paged` ran at 0.97 to 1.04 times `decode_split`'s speed, shape by shape, and wrote the same output, every bit of it")
	slices.Sort(batches)
	if shapes != 15 || fmt.Sprintf("%.2f", lo) != "0.97" || fmt.Sprintf("%.2f", hi) != "1.04" || !slices.Equal(slices.Compact(batches), []int{1, 8, 64}) ||
		slices.Min(keys) != 4096 || slices.Max(keys) != 131072 {
		t.Errorf("%s: %d shapes, decode_paged at %.3f to %.3f times decode_split's speed, batches %v, keys %v", file, shapes, lo, hi, batches, keys)
	}
	says("a pool of 16 pages, 8 a sequence")
	says("(steps 1, 3 and 5; each kv-tile is a split of its own here, ended at the step after it)")
	run, err := lessons.Runs["decode-paged"].Run()
	if err != nil {
		t.Fatal(err)
	}
	c := run.Config()
	// Steps 1, 3 and 5 (the stepper counts from 1, in the trace's order)
	// are head 0's first three kv-tiles, each followed by its split's end.
	var steps []*instrument.Record
	if err := kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error {
		if r.Kind != instrument.KindInputs {
			steps = append(steps, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for j, k := range []int{0, 2, 4} {
		if r, end := steps[k], steps[k+1]; r.Kind != instrument.KindFlashStep || r.BH != 0 || r.J != j || end.Kind != instrument.KindSplitEnd || end.J != j {
			t.Errorf("decode-paged's step %d is %s of batch-head %d at %d, then %s %d; the lesson says head 0's kv-tile %d, then its split's end", k+1, r.Kind, r.BH, r.J, end.Kind, end.J, j)
		}
	}
	if splits, per := kernels.DecodeSplits(&c); c.Variant != instrument.VariantDecodePaged || c.Batch != 2 || kernels.Pages(&c) != 16 || c.Tc() != 8 || per != 1 || splits != 8 {
		t.Errorf("decode-paged is %+v: %d pages, %d splits of %d", c, kernels.Pages(&c), splits, per)
	}
}

// earlierCuDNNLead is the lead over SDPA's cuDNN backend that run bb's
// timing gave decode_split at batch 1 with 8 K/V heads, 4k to 32k keys:
// its TB/s over cuDNN's, the least and the most, from the raw files (SDPA
// timed then with Python's launch inside each timing).
func earlierCuDNNLead(t *testing.T) (lo, hi float64) {
	t.Helper()
	rate := func(file string, fields, col int) map[string]float64 {
		m := map[string]float64{}
		for _, line := range runFile(t, file) {
			f := strings.Fields(line)
			if len(f) == fields && f[0] == "1" && f[3] == "8" {
				v, err := strconv.ParseFloat(f[col], 64)
				if err != nil {
					t.Fatalf("%s: %q", file, line)
				}
				m[f[1]] = v
			}
		}
		return m
	}
	split := rate("2026-11-28-decode-grid-bb-decode_group.txt", 14, 9)
	cudnn := rate("2026-11-28-decode-grid-bb-sdpa_decode.txt", 9, 8)
	lo, hi = math.Inf(1), 0
	for _, n := range []string{"4096", "16384", "32768"} {
		if split[n] == 0 || cudnn[n] == 0 {
			t.Fatalf("run bb has no batch-1, 8-head row at %s keys", n)
		}
		lo, hi = min(lo, split[n]/cudnn[n]), max(hi, split[n]/cudnn[n])
	}
	return lo, hi
}

// TestDecodeTableIsItsRun holds docs/DECODE.md's first split-KV table,
// the one lesson 15 quotes, to its run's raw files: every row's
// decode_split and decode_group TB/s, splits and ratio to the read-only
// kernel timed between decode_split's runs (decode.cu's table), its ratio
// to bandwidth.cu's read-only kernel on a buffer of the cache's size, and
// SDPA's two backends (sdpa_decode.py's).
func TestDecodeTableIsItsRun(t *testing.T) {
	t.Parallel()
	_, run, rows := decodeDoc(t)
	raw := func(part string) []string { return runFile(t, "2026-11-28-decode-grid-"+run+"-"+part+".txt") }
	read := map[int]float64{} // bytes → the read-only kernel's TB/s
	for _, line := range raw("bandwidth") {
		if f := strings.Fields(line); len(f) == 6 {
			if bytes, err := strconv.Atoi(f[0]); err == nil {
				read[bytes] = num2(t, f[2])
			}
		}
	}
	type key struct{ b, n, hkv int }
	atoi := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("run %s: %q is no count", run, s)
		}
		return v
	}
	rungs := map[key][]string{}
	for _, line := range raw("decode_group") {
		if f := strings.Fields(line); len(f) == 14 && isCount(f[0]) {
			rungs[key{atoi(f[0]), atoi(f[1]), atoi(f[3])}] = f
		}
	}
	sdpa := map[key][]string{}
	for _, line := range raw("sdpa_decode") {
		if f := strings.Fields(line); len(f) == 13 && isCount(f[0]) {
			sdpa[key{atoi(f[0]), atoi(f[1]), atoi(f[3])}] = f
		}
	}
	two := func(s string) string { return fmt.Sprintf("%.2f", num2(t, s)) }
	for _, r := range rows {
		k := key{r.b, r.n, r.hkv}
		f, ok := rungs[k]
		if !ok {
			t.Errorf("run %s's decode.cu has no B=%d, N=%d, Hkv=%d", run, r.b, r.n, r.hkv)
			continue
		}
		bytes := 2 * r.b * r.hkv * r.n * 128 * 2
		overBandwidth := "—"
		if bw, ok := read[bytes]; ok {
			overBandwidth = fmt.Sprintf("%.2f", num2(t, f[9])/bw)
		}
		if r.overBandwidth != overBandwidth {
			t.Errorf("B=%d, N=%d, Hkv=%d: docs/DECODE.md gives decode_split over bandwidth.cu's read-only kernel as %s, run %s's raw files %s", r.b, r.n, r.hkv, r.overBandwidth, run, overBandwidth)
		}
		flash, cudnn, flashShare, cuDNNShare, overFlash, overCuDNN := "—", "—", "—", "—", "—", "—"
		if g, ok := sdpa[k]; ok {
			flash, cudnn, flashShare, cuDNNShare = two(g[6]), two(g[8]), two(g[11]), two(g[12])
			overFlash = fmt.Sprintf("%.2f", num2(t, f[13])/num2(t, g[11]))
			overCuDNN = fmt.Sprintf("%.2f", num2(t, f[13])/num2(t, g[12]))
		}
		for _, c := range []struct{ doc, raw, what string }{
			{r.split, two(f[9]), "decode_split's TB/s"}, {strconv.Itoa(r.splits), f[7], "splits"},
			{r.group, two(f[6]), "decode_group's TB/s"}, {r.ratio, two(f[13]), "decode_split over the read-only kernel between its runs"},
			{r.sdpaFlash, flash, "SDPA FlashAttention-2's TB/s"}, {r.sdpaCuDNN, cudnn, "SDPA cuDNN's TB/s"},
			{r.flashShare, flashShare, "SDPA FlashAttention-2's share of its read-only kernel"},
			{r.cuDNNShare, cuDNNShare, "SDPA cuDNN's share of its read-only kernel"},
			{r.overFlash, overFlash, "decode_split's share over FlashAttention-2's"}, {r.overCuDNN, overCuDNN, "decode_split's share over cuDNN's"},
		} {
			if c.doc != c.raw {
				t.Errorf("B=%d, N=%d, Hkv=%d: docs/DECODE.md gives %s as %s, run %s's raw files %s", r.b, r.n, r.hkv, c.what, c.doc, run, c.raw)
			}
		}
	}
	if len(rows) != 24 {
		t.Errorf("docs/DECODE.md's table has %d rows; the grid has 24", len(rows))
	}
}

// isCount says whether s is a whole number: a table row, not a header.
func isCount(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
