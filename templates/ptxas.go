package templates

import "flashstep/kernels"

// ptxasTarget names the architecture ptxas compiled a table's kernels for:
// sm_90 for the ladder's PTX, sm_90a for the Hopper rungs' (their sources
// open with `// needs: sm_90a`), both where a table holds both.
func ptxasTarget(ks []kernels.PtxasFigures) string {
	hopper, other := 0, 0
	for _, k := range ks {
		if kernels.ModuleArch(k.Module) == kernels.ArchHopper {
			hopper++
		} else {
			other++
		}
	}
	switch {
	case hopper > 0 && other == 0:
		return "sm_90a (the H100 with Hopper's own instructions: wgmma, TMA, setmaxnreg)"
	case hopper > 0:
		return "sm_90 (the H100), the Hopper rungs' for sm_90a (with Hopper's own instructions)"
	}
	return "sm_90 (the H100)"
}
