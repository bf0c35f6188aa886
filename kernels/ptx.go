package kernels

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// The kernels' PTX, compiled by `make ptx` and committed: flash2.ptx and
// flash2_traced.ptx (built with -DFS_TRACE), likewise naive. ptxas.txt is what
// `ptxas -v -arch=sm_90` said of each.
//
//go:embed ptx/*.ptx ptx/ptxas.txt
var ptxFiles embed.FS

// PTX modules by name.
const (
	ModuleFlash2       = "flash2"
	ModuleFlash2Traced = "flash2_traced"
	ModuleNaive        = "naive"
	ModuleNaiveTraced  = "naive_traced"

	ModuleFlash2Fast       = "flash2_fast"
	ModuleFlash2FastTraced = "flash2_fast_traced"
	ModuleNaiveMMA         = "naive_mma"
	ModuleNaiveMMATraced   = "naive_mma_traced"

	ModuleNaiveRow        = "naive_row"
	ModuleNaiveRowTraced  = "naive_row_traced"
	ModuleFlash1          = "flash1"
	ModuleFlash1Traced    = "flash1_traced"
	ModuleFlash2MMA       = "flash2_mma"
	ModuleFlash2MMATraced = "flash2_mma_traced"
)

// Modules lists every PTX module.
var Modules = []string{ModuleFlash2, ModuleFlash2Traced, ModuleNaive, ModuleNaiveTraced, ModuleFlash2Fast, ModuleFlash2FastTraced, ModuleNaiveMMA, ModuleNaiveMMATraced,
	ModuleNaiveRow, ModuleNaiveRowTraced, ModuleFlash1, ModuleFlash1Traced, ModuleFlash2MMA, ModuleFlash2MMATraced}

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

// PtxasText is ptxas.txt as the compiler wrote it, for people to read.
func PtxasText() string {
	b, _ := ptxFiles.ReadFile("ptx/ptxas.txt")
	return string(b)
}

// Ptxas parses ptxas.txt: registers, stack, spills and static shared memory
// of every kernel as compiled for sm_90.
func Ptxas() []PtxasFigures {
	b, _ := ptxFiles.ReadFile("ptx/ptxas.txt")
	var out []PtxasFigures
	var module string
	byKernel := map[string]*PtxasFigures{}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	sc := bufio.NewScanner(strings.NewReader(string(b)))
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
