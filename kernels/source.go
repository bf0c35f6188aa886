package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"flashstep/instrument"
)

// The kernels' CUDA source, for the stepper to show beside each step with
// the lines of the step's phase lit. The phases are marked in the .cu files
// themselves, one line each:
//
//	//> scores: S = Q_i K_jᵀ · scale, masked
//
// begins the phase "scores" (titled by the rest of the line); it runs to the
// next marker, and "//> end" closes one without opening another. A phase may
// have several regions (flash2_fast loads K and V in two places). The
// markers are comments, so the PTX does not change with them;
// TestSourcePhases fails when they drift from the code they mark.
//
// The sources sit in kernels/cuda by family (forward, hopper, backward,
// and the headers they share in common); a kernel's file is found by its
// name, so a folder is the reader's map, not something to register.
//
//go:embed cuda/*/*.cu
var cuFiles embed.FS

// cuPaths maps a kernel's name to its source's path in cuFiles.
var cuPaths = func() map[string]string {
	paths, _ := fs.Glob(cuFiles, "cuda/*/*.cu")
	m := map[string]string{}
	for _, p := range paths {
		m[strings.TrimSuffix(path.Base(p), ".cu")] = p
	}
	return m
}()

// Region is a run of source lines, numbered from 1, both ends included.
type Region struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// Phase is one marked part of a kernel's source.
type Phase struct {
	Name    string   `json:"name"`
	Title   string   `json:"title"`
	Regions []Region `json:"regions"`
}

// KernelSource is a variant's CUDA source and its marked phases.
type KernelSource struct {
	File   string   `json:"file"`
	Lines  []string `json:"lines"`
	Phases []Phase  `json:"phases"` // in order of first appearance
	// Steps maps a step to the phases it lights, keyed by record kind
	// ("flash_step:first" for a q-tile's first kv-tile): StepPhases for the
	// browser, so the mapping stays in one place.
	Steps map[string][]string `json:"steps"`
}

var reMarker = regexp.MustCompile(`^\s*//> ([a-z-]+)(?::\s*(.*))?$`)

// Source reads a variant's source and its phases.
func Source(v instrument.Variant) (*KernelSource, error) {
	file, ok := sourceFile(v)
	if !ok {
		return nil, fmt.Errorf("no source for variant %v", v)
	}
	b, err := cuFiles.ReadFile(file)
	if err != nil {
		return nil, err
	}
	ks := &KernelSource{File: "kernels/" + file, Lines: strings.Split(strings.TrimRight(string(b), "\n"), "\n")}
	index := map[string]int{} // phase name -> its place in ks.Phases
	open := ""
	start := 0
	closeOpen := func(last int) {
		if open != "" && last >= start {
			p := &ks.Phases[index[open]]
			p.Regions = append(p.Regions, Region{start, last})
		}
		open = ""
	}
	for k, line := range ks.Lines {
		m := reMarker.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n := k + 1
		closeOpen(n - 1)
		if m[1] == "end" {
			continue
		}
		if _, seen := index[m[1]]; !seen {
			index[m[1]] = len(ks.Phases)
			ks.Phases = append(ks.Phases, Phase{Name: m[1], Title: m[2]})
		}
		open, start = m[1], n
	}
	closeOpen(len(ks.Lines))
	ks.Steps = map[string][]string{}
	for _, k := range []instrument.Kind{instrument.KindFlashStep, instrument.KindEpilogue, instrument.KindScores, instrument.KindSoftmax, instrument.KindPV} {
		if names := StepPhases(v, k, 1); names != nil {
			ks.Steps[k.String()] = names
		}
	}
	if Info(v).Family == FamilyDecodeSplit {
		for _, k := range []instrument.Kind{instrument.KindSplitEnd, instrument.KindMerge} {
			ks.Steps[k.String()] = StepPhases(v, k, 0)
		}
	}
	ks.Steps[instrument.KindFlashStep.String()+":first"] = StepPhases(v, instrument.KindFlashStep, 0)
	if Info(v).Backward {
		for _, k := range []instrument.Kind{instrument.KindBwdPre, instrument.KindBwdDQ, instrument.KindBwdDP, instrument.KindBwdDS, instrument.KindBwdKV} {
			ks.Steps[k.String()] = StepPhases(v, k, -1)
		}
		step := instrument.KindBwdStep.String()
		ks.Steps[step] = BwdStepPhases(false, false)
		ks.Steps[step+":first"] = BwdStepPhases(true, false)
		ks.Steps[step+":last"] = BwdStepPhases(false, true)
		ks.Steps[step+":only"] = BwdStepPhases(true, true)
	}
	return ks, nil
}

// BwdStepPhases names the phases a backward step lights: every step loads
// its q-tile and runs the loop's body; the block's first q-tile also loads
// K_j and V_j, and its last writes dK_j and dV_j (a block that sees one
// q-tile does both). The pages key them "bwd_step", "bwd_step:first",
// "bwd_step:last" and "bwd_step:only".
func BwdStepPhases(first, last bool) []string {
	var out []string
	if first {
		out = append(out, "load-kv")
	}
	out = append(out, "load-q", "recompute", "dv", "dp-ds", "dk", "dq")
	if last {
		out = append(out, "write-dkdv")
	}
	return out
}

// StepPhases names the phases of a variant's source that a record's step
// ran: the stepper lights them. A phase a source lacks is left out.
func StepPhases(v instrument.Variant, kind instrument.Kind, j int) []string {
	switch {
	case v == instrument.VariantNaiveRow && kind == instrument.KindScores:
		// Pass 1 over the keys: the row's scores and its max.
		if j == 0 {
			return []string{"load-q", "scores"}
		}
		return []string{"scores"}
	case v == instrument.VariantNaiveRow && kind == instrument.KindFlashStep:
		return []string{"pv"} // pass 2: exp, the sum and P·V against the known max
	case v == instrument.VariantFlash1 && kind == instrument.KindFlashStep:
		// Every step reloads its q-tile's state; K_j and V_j stay for the
		// inner loop, but a step is where a student looks for them.
		return []string{"load-kv", "load-q", "scores", "softmax", "pv"}
	}
	switch kind {
	case instrument.KindFlashStep:
		if j == 0 {
			return []string{"load-q", "load-kv", "scores", "softmax", "pv"}
		}
		return []string{"load-kv", "scores", "softmax", "pv"}
	case instrument.KindTiming:
		if j < 0 {
			return []string{"epilogue"}
		}
		if v == instrument.VariantNaive {
			return nil // a naive timing record does not say which kernel it is
		}
		return StepPhases(v, instrument.KindFlashStep, j)
	case instrument.KindScores:
		return []string{"scores"}
	case instrument.KindSoftmax:
		return []string{"softmax"}
	case instrument.KindPV:
		return []string{"pv"}
	case instrument.KindEpilogue:
		return []string{"epilogue"}
	case instrument.KindBwdPre:
		return []string{"pre"}
	case instrument.KindBwdStep:
		return BwdStepPhases(false, false) // the pages choose among BwdStepPhases' four
	case instrument.KindBwdDQ:
		if v == instrument.VariantNaiveBwd {
			return []string{"dq"} // its dq kernel computes dQ whole; flash2_bwd's only scales it
		}
		return []string{"dq-scale"}
	case instrument.KindBwdDP:
		return []string{"dp"}
	case instrument.KindBwdDS:
		return []string{"ds"}
	case instrument.KindBwdKV:
		return []string{"dkv"}
	case instrument.KindSplitEnd:
		return []string{"split-end"} // the split's walk ends as a block's does, into its partial
	case instrument.KindMerge:
		return []string{"merge-lse", "merge"}
	}
	return nil
}

// sourceFile is rung v's CUDA source file: its name, .cu.
func sourceFile(v instrument.Variant) (string, bool) {
	info := Info(v)
	if info == nil {
		return "", false
	}
	p, ok := cuPaths[info.Name()]
	return p, ok
}

// cuSource reads the source file a kernel's name gives ("flash2.cu"),
// wherever its family's folder is.
func cuSource(file string) ([]byte, error) {
	p, ok := cuPaths[strings.TrimSuffix(file, ".cu")]
	if !ok {
		return nil, fmt.Errorf("no kernel source %s in kernels/cuda", file)
	}
	return cuFiles.ReadFile(p)
}

// SourcePath is where variant v's CUDA source sits in the repository
// (kernels/cuda/<family>/<name>.cu), or "" for an unknown variant.
func SourcePath(v instrument.Variant) string {
	if p, ok := sourceFile(v); ok {
		return "kernels/" + p
	}
	return ""
}
