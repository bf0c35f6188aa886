package kernels

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The kernels' PTX, compiled by `make ptx` and committed: flash2.ptx and
// flash2_traced.ptx (built with -DFS_TRACE), likewise naive. ptxas.txt is what
// `ptxas -v -arch=sm_90` said of each. The Hopper rungs' PTX (Arch sm_90a)
// comes from a newer nvcc on the GPU machine (scripts/ptx-hopper), with
// ptxas-hopper.txt, what `ptxas -v -arch=sm_90a` said of it there.
//
//go:embed ptx/*.ptx ptx/ptxas.txt ptx/ptxas-hopper.txt
var ptxFiles embed.FS

// Modules lists every PTX module: each rung's untraced one (its name) and
// traced one (name + "_traced"), in variant order, the order PTXHash reads
// them in.
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

// PTX returns a module's PTX text.
func PTX(module string) (string, error) {
	b, err := ptxFiles.ReadFile("ptx/" + module + ".ptx")
	return string(b), err
}

// PTXHash identifies the compiled kernels: a cached GPU trace is only valid
// for the PTX that made it.
func PTXHash() string {
	h := sha256.New()
	for _, m := range Modules {
		b, _ := ptxFiles.ReadFile("ptx/" + m + ".ptx")
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

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
	b, _ := ptxFiles.ReadFile("ptx/ptxas.txt")
	h, _ := ptxFiles.ReadFile("ptx/ptxas-hopper.txt")
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
