package kernels

import (
	"bufio"
	"embed"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What ptxas said of the kernels' PTX when it was compiled: ptxas.txt is
// what `ptxas -v -arch=sm_90` said of each module `make ptx` builds,
// ptxas-hopper.txt what `ptxas -v -arch=sm_90a` said of the Hopper rungs'
// on the GPU machine (scripts/ptx-hopper). The PTX itself (15 MB) is
// package kernels/ptx's, which only what loads or names it imports (the
// GPU worker, the kernels page): the lessons, the ladder and the static
// site's WebAssembly read these figures without it.
//
//go:embed ptx/ptxas.txt ptx/ptxas-hopper.txt
var ptxasFiles embed.FS

// Modules lists every PTX module: each rung's untraced one (its name) and
// traced one (name + "_traced"), in variant order, the order ptx.Hash
// reads them in.
var Modules = func() []string {
	byID := slices.SortedFunc(slices.Values(rungs), func(a, b *VariantInfo) int { return int(a.Variant) - int(b.Variant) })
	var out []string
	for _, v := range byID {
		out = append(out, v.Module(), v.Module()+"_traced")
	}
	return out
}()

// ProbeModule is a traced module for the worker's probe of the trace ABI:
// every traced module holds fs_probe.
var ProbeModule = Modules[1]

// PtxasFigures is what ptxas reported for one kernel of one module at build.
type PtxasFigures struct {
	Module      string `json:"module"`
	Kernel      string `json:"kernel"`
	Registers   int    `json:"registers"`
	StackBytes  int    `json:"stack_bytes"`
	SpillStores int    `json:"spill_stores"`
	SpillLoads  int    `json:"spill_loads"`
	SharedBytes int    `json:"static_shared_bytes"`
}

var (
	reModule   = regexp.MustCompile(`^== (\w+)\.ptx`)
	reEntry    = regexp.MustCompile(`Compiling entry function '(\w+)'`)
	reStack    = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed     = regexp.MustCompile(`Used (\d+) registers`)
	reSharedSm = regexp.MustCompile(`(\d+) bytes smem`)
)

// PtxasText is ptxas.txt, then ptxas-hopper.txt, as the compilers wrote
// them, for people to read.
func PtxasText() string {
	b, _ := ptxasFiles.ReadFile("ptx/ptxas.txt")
	h, _ := ptxasFiles.ReadFile("ptx/ptxas-hopper.txt")
	return string(b) + string(h)
}

// Ptxas parses ptxas.txt: registers, stack, spills and static shared memory
// of every kernel as compiled for sm_90 (sm_90a for the Hopper rungs).
func Ptxas() []PtxasFigures {
	b := PtxasText()
	var out []PtxasFigures
	var module string
	byKernel := map[string]*PtxasFigures{}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	sc := bufio.NewScanner(strings.NewReader(b))
	var cur *PtxasFigures
	for sc.Scan() {
		line := sc.Text()
		if m := reModule.FindStringSubmatch(line); m != nil {
			module = m[1]
			continue
		}
		if m := reEntry.FindStringSubmatch(line); m != nil {
			out = append(out, PtxasFigures{Module: module, Kernel: m[1]})
			cur = &out[len(out)-1]
			byKernel[module+"/"+m[1]] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if m := reStack.FindStringSubmatch(line); m != nil {
			cur.StackBytes, cur.SpillStores, cur.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
		}
		if m := reUsed.FindStringSubmatch(line); m != nil {
			cur.Registers = atoi(m[1])
			if s := reSharedSm.FindStringSubmatch(line); s != nil {
				cur.SharedBytes = atoi(s[1])
			}
		}
	}
	return out
}
