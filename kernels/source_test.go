package kernels

import (
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// phaseCode is, per source file and phase, code that must sit inside the
// phase's lines: a marker that drifts off its code fails here.
var phaseCode = map[string]map[string][]string{
	"flash2.cu": {
		"load-q": {"sQ[e] ="}, "load-kv": {"sK[c * KS + x] =", "sV[e] ="}, "scores": {"__fmul_rn(sQ[", "FS_NEG_INF : __fmul_rn(acc[k], scale)"},
		"softmax": {"fmaxf(m, rowMax)", "expf(__fsub_rn(m, mBase))", "l = __fadd_rn(__fmul_rn(alpha, l), rowSum)"},
		"pv":      {"o[t] = __fmul_rn(sAlpha", "__fmul_rn(sS[(e / D) * SS + c], sV["}, "epilogue": {"__fdiv_rn(o[t], lr)", "LSE[(size_t)bh * N"},
	},
	"naive.cu": {
		"scores": {"naive_scores(", "float *s = S + (size_t)bh * N * N"}, "softmax": {"naive_softmax(", "float *prow = P + "}, "pv": {"naive_pv(", "sV["},
		"epilogue": {"O[((size_t)bh * N + r0) * D + e] = o[t]"},
	},
	"naive_mma.cu": {
		"scores": {"naive_mma_scores", "fast::mma16816(s[mi]"}, "softmax": {"naive_mma_softmax", "__float2bfloat16_rn("},
		"pv": {"naive_mma_pv", "fast::ldsm_x4_trans("}, "epilogue": {"__floats2bfloat162_rn(o[mi][di][2 * h]"},
	},
	"flash2_mma.cu": {"load-q": {"load_tile<BR, D, NT>(sQ"}, "load-kv": {"load_tile<BC, D, NT>(sK", "load_tile<BC, D, NT>(sV"}, "scores": {"fast::mma16816(s[2 * n2]", "__fmul_rn(s[ni][e], scale)"}, "softmax": {"expf(__fsub_rn(m[h], mb))", "l[h] = fmaf(l[h], alpha, rs)"}, "pv": {"fast::ldsm_x4_trans(", "fast::mma16816(o[2 * d2]"}, "epilogue": {"__fadd_rn(m[h], logf(lt))"}},
	"flash1.cu":     {"load-kv": {"sK[c * KS + x] =", "sV[e] ="}, "load-q": {"sQ[e] =", "__ldcg(&O[", "__ldcg(&mState["}, "scores": {"__fmul_rn(sQ[", "FS_NEG_INF : __fmul_rn(acc[k], scale)"}, "softmax": {"expf(__fsub_rn(m, mBase))", "l = __fadd_rn(lOld, rowSum)"}, "pv": {"__fmul_rn(sLOld[", "__fdiv_rn(o[t], lr)", "mState[r0 + tid] = m"}, "epilogue": {"__fadd_rn(m, logf(l))", "LSE[(size_t)bh * N"}},
	"flash2_fast.cu": {
		"load-q": {"load_tile<BR, D, NT, SW, ASYNC>(sQ"}, "load-kv": {"load_tile<BC, D, NT, SW, ASYNC>(sV", "load_tile<BC, D, NT, SW, ASYNC>(sK"},
		"scores": {"mma16816(s[mi]", "s[mi][ni][e] = -INFINITY"}, "softmax": {"ex2(fmaf(m[mi][h], sl2, -mb))", "o[mi][di][2 * h] *= alpha"},
		"pv": {"ldsm_x4_trans(", "mma16816(o[mi]"}, "epilogue": {"LSE[(size_t)bh * N + row] = lse"},
	},
	"decode_group.cu": {
		"load-q": {"fast::cp_async16(fast::smem_addr(sQ"}, "load-kv": {"fast::load_tile<BC, D, NT, true>(sKV + s * 2 * BC * D, K + kvBase"},
		"scores": {"fast::mma16816(s[2 * n2], a, b0, b1)", "s[ni][e] = -INFINITY"}, "softmax": {"fast::ex2(fmaf(m[h], sl2, -mb))", "l[h] = fmaf(l[h], alpha, rs)"},
		"pv": {"fast::ldsm_x4_trans(", "fast::mma16816(o[2 * d2], a, b0, b1)"}, "epilogue": {"LSE[row] = lse", "LSES[row] = lse"},
	},
	"decode_split.cu": {
		"load-q": {"decode_group_block"}, "load-kv": {"the split's first kv-tiles"}, "scores": {"a quarter of the keys a warp"},
		"softmax": {"from a fresh m and l at the split's first kv-tile"}, "pv": {"a quarter of d a warp"}, "split-end": {"O_s = O/l"},
		"epilogue": {"O[row * D + tid + k * MT] = __float2bfloat16_rn", "LSE[row] = lse[r]"}, "merge-lse": {"lse[r] = __fadd_rn(mx, logf(sum))"},
		"merge": {"expf(__fsub_rn(ls, lse[r]))", "o[r][k] = fmaf(w[r], os[tid + k * MT], o[r][k])"},
	},
	"flash3_wgmma.cu": {
		"load-q": {"load_panels<BR, D, NT>(sQ"}, "load-kv": {"load_panels<BC, D, NT>(sK0 + (stage ^ 1)", "load_panels<BC, D, NT>(sV0 + (stage ^ 1)"},
		"scores": {"wgmma_s<BC>(s, a, b, kk > 0)", "mask_scores<NI, CAUSAL>(s, w, j * BC, N)"}, "softmax": {"online_softmax<NI, DI, BR, BC, D>("},
		"pv": {"wgmma_o<D>(o, a, desc(vBase"}, "epilogue": {"epilogue<DI, BR, BC, D>("},
	},
	"flash3_tma.cu": {
		"load-q": {"tma_load_panels<BR, D>(sQ, tmQ, r0, bh, &fullQ)", "mbar_init_fence()"}, "load-kv": {"tma_load_panels<BC, D>(sK0 + (stage ^ 1)", "tma_load_panels<BC, D>(sV0 + (stage ^ 1)"},
		"scores": {"mbar_wait(&fullK[stage], parity)", "wgmma_s<BC>(s, a, b, kk > 0)", "mask_scores<NI, CAUSAL>(s, w, j * BC, N)"}, "softmax": {"online_softmax<NI, DI, BR, BC, D>("},
		"pv": {"mbar_wait(&fullV[stage], parity)", "wgmma_o<D>(o, a, desc(vBase"}, "epilogue": {"epilogue<DI, BR, BC, D>("},
	},
	"flash3_ws.cu": {
		"load-kv": {"regs_dec<PR>()", "mbar_wait(&emptyK[s], (j / ST - 1) & 1)", "tma_load_panels<BC, D>(sV0 + s * BC * D"},
		"load-q":  {"regs_inc<CR>()", "mbar_wait(&fullQ, 0)"},
		"scores":  {"mbar_wait(&fullK[stage], parity)", "mbar_arrive(&emptyK[stage])", "mask_scores<NI, CAUSAL>(s, w, j * BC, N)"}, "softmax": {"online_softmax<NI, DI, BR, BC, D>("},
		"pv": {"mbar_wait(&fullV[stage], parity)", "mbar_arrive(&emptyV[stage])"}, "epilogue": {"epilogue<DI, BR, BC, D>("},
	},
	"flash2_bwd.cu": {
		"pre":        {"flash2_bwd_pre(", "Delta[(size_t)bh * N + r0 + tid] = acc", "dQ[base + (size_t)r0 * D + e] = 0.f"},
		"load-kv":    {"sK[c * KS + x] = in ?", "sV[c * KS + x] = in ?", "dk[t] = dv[t] = 0.f"},
		"load-q":     {"sQ[e] = in ?", "sDO[e] = in ?", "sL[tid] =", "sD[tid] ="},
		"recompute":  {"s = __fmul_rn(acc, scale)", "p = expf(__fsub_rn(s, sL[r]))"},
		"dv":         {"dv[t] = __fadd_rn(dv[t], __fmul_rn(sP[r * PS + c], sDO[r * D + x]))"},
		"dp-ds":      {"__fmul_rn(sDO[r * D + x], sV[c * KS + x])", "ds = __fmul_rn(sP[r * PS + c], __fsub_rn(dp, sD[r]))"},
		"dk":         {"dk[t] = __fadd_rn(dk[t], __fmul_rn(sDS[r * PS + c], sQ[r * D + x]))"},
		"dq":         {"__fmul_rn(sDS[r * PS + c], sK[c * KS + x])", "atomicAdd(&dQ["},
		"write-dkdv": {"__fmul_rn(dk[t], scale)", "dV[base + (size_t)c0 * D + e] = dv[t]"},
		"dq-scale":   {"flash2_bwd_dq(", "__fmul_rn(__ldcg(&dQ[base + e]), scale)"},
	},
	"flash2_bwd_mma.cu": {
		"pre":        {"bwd_ends::pre<BR, BC, D, NT>(dO, O, L, Delta, dQ, N"},
		"load-kv":    {"fast::load_tile<BC, D, NT, true>(sK, K + base, c0, N, tid)", "fast::load_tile<BC, D, NT, true>(sV, V + base, c0, N, tid)", "dv[di][e] = dk[di][e] = 0.f"},
		"load-q":     {"fast::load_tile<BR, D, NT, true>(sQ + (buf ^ 1) * BR * D", "lb[tid] = __fmul_rn(lNext, 1.4426950408889634f)", "fast::cp_async_wait<1>()"},
		"recompute":  {"mma_nt<BR, D>(p, sK, wc, q, lane)", "fast::ex2(fmaf(p[ni][e], sl2, -lb[r]))"},
		"dp-ds":      {"mma_nt<BR, D>(dp, sV, wc, d_o, lane)", "__fmul_rn(p[ni][e], __fsub_rn(dp[ni][e], dd[r]))", "sDS + fast::swz<CQ>(wc + g, ni) * 8 + 2 * t) = dsk[ni][0]"},
		"dv":         {"mma_acc<BR, D>(dv, pk, d_o, lane)"},
		"dk":         {"mma_acc<BR, D>(dk, dsk, q, lane)"},
		"dq":         {"fast::mma16816(dq[2 * d2], a, b0, b1)", "sStage + (g + 8 * h) * SP + di * 8 + 2 * t", "atomicAdd(dQ + base + (size_t)(r0 + wq + rr) * D + x0 + cc * 32 + lane"},
		"write-dkdv": {"__fmul_rn(dk[di][2 * h], scale)", "make_float2(dv[di][2 * h], dv[di][2 * h + 1])"},
		"dq-scale":   {"bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale"},
	},
	"flash3_bwd_wgmma.cu": {
		"pre":        {"bwd_ends::pre<BR, BC, D, NT>(dO, O, L, Delta, dQ, N"},
		"load-kv":    {"hopper::load_panels<BC, D, NT>(sK, K + base, c0, N, tid)", "hopper::load_panels<BC, D, NT>(sV, V + base, c0, N, tid)", "dv[x] = dk[x] = 0.f"},
		"load-q":     {"hopper::load_panels<BR, D, NT>(sQ + (buf ^ 1) * BR * D", "lb[tid] = __fmul_rn(lNext, 1.4426950408889634f)", "hopper::fence_async_shared()"},
		"recompute":  {"hopper::wgmma_ss_n64(p, desc(kRows + at, 16, 1024), desc(qB + bt, 16, 1024), kk > 0)", "hopper::wgmma_ss_n64(dp, desc(vRows + at", "fast::ex2(fmaf(p[4 * ni + e], sl2, -lb[r]))"},
		"dp-ds":      {"__fmul_rn(p[4 * ni + e], __fsub_rn(dp[4 * ni + e], dd[r]))", "panel_offset<BC>(wc + g, ni * 8 + 2 * t)) = dsk[ni][0]"},
		"dv":         {"hopper::wgmma_o<D>(dv, a, desc(doB + kk * 16 * 128, BR * 128, 1024))"},
		"dk":         {"hopper::wgmma_o<D>(dk, a, desc(qB + kk * 16 * 128, BR * 128, 1024))"},
		"dq":         {"hopper::wgmma_ss_n64_tt(dq, desc(dsBase + kk * 16 * 128", "sStage + (g + 8 * h) * SP + di * 8 + 2 * t", "atomicAdd(dQ + base + (size_t)(r0 + wq + rr) * D + x0 + cc * 32 + lane"},
		"write-dkdv": {"__fmul_rn(dk[4 * di + 2 * h], scale)", "make_float2(dv[4 * di + 2 * h], dv[4 * di + 2 * h + 1])"},
		"dq-scale":   {"bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale"},
	},
	"flash3_bwd_tma.cu": {
		"pre":        {"bwd_ends::pre<BR, BC, D, NT, true>(dO, O, L, Delta, dQ, N"},
		"load-kv":    {"hopper::tma_load_panels<BC, D>(sK, tmK, c0, bh, &fullKV)", "hopper::tma_load_panels<BC, D>(sV, tmV, c0, bh, &fullKV)", "dv[x] = dk[x] = 0.f", "hopper::mbar_wait(&fullKV, 0)"},
		"load-q":     {"hopper::mbar_wait(&full[s], parity)", "load_qtile<BR, D>(q, d_o, l, dd, &full[s], tmQ, tmDO, tmL, tmD, r0 + NS * BR, bh, Tr)"},
		"recompute":  {"(flash3_bwd_wgmma.cu's qtile)"},
		"dp-ds":      {"dSᵀ = Pᵀ ∘ (dPᵀ − D_i)"},
		"dv":         {"dV_j += bf16(Pᵀ) dO_i"},
		"dk":         {"dK_j += bf16(dSᵀ) Q_i"},
		"dq":         {"flash3_bwd_wgmma::qtile<BR, BC, D>(q, d_o, l, dd, sK, sV, sDS, sStage, dQ, dv, dk"},
		"write-dkdv": {"flash3_bwd_wgmma::write_dkdv<BR, BC, D>(dK, dV, dv, dk, base, c0, N, scale)"},
		"dq-scale":   {"bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale"},
	},
	"naive_bwd.cu": {
		"dp":  {"naive_bwd_dp(", "dP[((size_t)bh * N + r0 + r) * N + c0 + c] = acc"},
		"ds":  {"naive_bwd_ds(", "d = __fadd_rn(d, __fmul_rn(__ldcg(&P[row + c]), __ldcg(&dP[row + c])))", "__fsub_rn(__ldcg(&dP[row + c]), d)"},
		"dq":  {"naive_bwd_dq(", "__fmul_rn(sDS[r * Bc + c], sK[c * D + x])", "__fmul_rn(acc[t], scale)"},
		"dkv": {"naive_bwd_dkv(", "__fmul_rn(sP[r * Bc + c], sDO[r * D + x])", "__fmul_rn(sDS[r * Bc + c], sQ[r * D + x])", "__fmul_rn(sDK[e], scale)"},
	},
	"flash3_overlap.cu": {
		"load-kv": {"regs_dec<PR>()"}, "load-q": {"regs_inc<CR>()", "if (c == 1) turn_pass(0)"},
		"scores":  {"mbar_wait(&fullK[0], 0)", "wgmma_wait<1>()", "mbar_arrive(&emptyK[next])", "mask_scores<NI, CAUSAL>(s, w, (j + 1) * BC, N)"},
		"softmax": {"softmax_row<NI, BR, BC, D>(h, s, m, l, pk,", "alpha[h] = softmax_row_in_place<NI, BR, BC, D>(h, s, m, l, sl2,"},
		"pv":      {"wgmma_o<D>(o, a, dv[kk])", "if (c == 0) turn_pass(1)", "rescale_row<DI>(o, h, alpha[h])", "pack_p<NI>(s, pk)"}, "epilogue": {"epilogue<DI, BR, BC, D>("},
	},
	"flash3_pingpong.cu": {
		"load-kv": {"regs_dec<PR>()", "mbar_wait(&emptyK[s], (j / ST - 1) & 1)"},
		"load-q":  {"regs_inc<CR>()", "if (c == 1) turn_pass(0)"},
		"scores":  {"turn_wait(c)", "turn_pass(c ^ 1)", "mbar_arrive(&emptyK[stage])"}, "softmax": {"online_softmax<NI, DI, BR, BC, D>("},
		"pv": {"turn_wait(c)", "if (c == 0 || j + 1 < jEnd) turn_pass(c ^ 1)", "mbar_arrive(&emptyV[stage])"}, "epilogue": {"epilogue<DI, BR, BC, D>("},
	},
}

// TestSourcePhases: every kernel source is mapped, its markers parse, every
// phase a step of its variant lights is marked, and each phase's lines hold
// the code it names.
func TestSourcePhases(t *testing.T) {
	t.Parallel()
	files, _ := fs.Glob(cuFiles, "cuda/*/*.cu")
	for _, f := range files {
		found := false
		for _, v := range rungs {
			found = found || v.Name()+".cu" == path.Base(f)
		}
		if !found {
			t.Errorf("%s belongs to no variant: the stepper could not show it", f)
		}
	}
	rng := testrand.New(t)
	for _, info := range rungs {
		v, file := info.Variant, info.Name()+".cu"
		ks, err := Source(v)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]Phase{}
		covered := map[int]string{}
		for _, p := range ks.Phases {
			if p.Title == "" || len(p.Regions) == 0 {
				t.Errorf("%s: phase %q has no title or no lines", file, p.Name)
			}
			byName[p.Name] = p
			for _, r := range p.Regions {
				if r.First < 1 || r.Last < r.First || r.Last > len(ks.Lines) || !strings.Contains(ks.Lines[r.First-1], "//> "+p.Name) {
					t.Errorf("%s: phase %q region %v does not start at its marker", file, p.Name, r)
				}
				for n := r.First; n <= r.Last; n++ {
					if other, ok := covered[n]; ok {
						t.Errorf("%s: line %d is in both %q and %q", file, n, other, p.Name)
					}
					covered[n] = p.Name
				}
			}
		}
		for _, k := range mirrorKinds(t, rng, v) {
			for _, j := range []int{0, 1, -1} {
				for _, name := range StepPhases(v, k, j) {
					if _, ok := byName[name]; !ok {
						t.Errorf("%s: a %s step lights phase %q, which the source does not mark", file, k, name)
					}
				}
			}
		}
		for name, snippets := range phaseCode[file] {
			p, ok := byName[name]
			if !ok {
				t.Errorf("%s: no phase %q", file, name)
				continue
			}
			var text strings.Builder
			for _, r := range p.Regions {
				text.WriteString(strings.Join(ks.Lines[r.First-1:r.Last], "\n"))
			}
			for _, want := range snippets {
				if !strings.Contains(text.String(), want) {
					t.Errorf("%s: phase %q no longer holds %q: its marker has drifted", file, name, want)
				}
			}
		}
		if phaseCode[file] == nil {
			// A rung's phaseCode row is its own test's to add: without
			// one its markers are held to their structure alone.
			t.Logf("%s: no phaseCode row; its markers are not held to the code they cover", file)
			continue
		}
		for name := range byName {
			if _, ok := phaseCode[file][name]; !ok {
				t.Errorf("%s: phase %q has no code it must hold in phaseCode", file, name)
			}
		}
	}
	// A backward block's first q-tile loads K_j and V_j, its last writes
	// dK_j and dV_j; every phase of the backward's source is lit by some
	// step.
	bwd, _ := Source(instrument.VariantFlash2Bwd)
	lit := map[string]bool{}
	for _, names := range bwd.Steps {
		for _, n := range names {
			lit[n] = true
		}
	}
	for _, p := range bwd.Phases {
		if !lit[p.Name] {
			t.Errorf("flash2_bwd.cu: no step lights phase %q", p.Name)
		}
	}
	if slices.Contains(bwd.Steps["bwd_step"], "load-kv") || !slices.Contains(bwd.Steps["bwd_step:first"], "load-kv") ||
		slices.Contains(bwd.Steps["bwd_step:first"], "write-dkdv") || !slices.Contains(bwd.Steps["bwd_step:last"], "write-dkdv") ||
		len(bwd.Steps["bwd_step:only"]) != len(bwd.Steps["bwd_step"])+2 {
		t.Errorf("backward steps light %v", bwd.Steps)
	}
	if got := StepPhases(instrument.VariantFlash2, instrument.KindFlashStep, 0); !slices.Contains(got, "load-q") {
		t.Errorf("the first kv-tile's step does not light the load of Q: %v", got)
	}
	if got := StepPhases(instrument.VariantFlash2, instrument.KindFlashStep, 3); slices.Contains(got, "load-q") {
		t.Errorf("a later kv-tile's step lights the load of Q: %v", got)
	}
}

// mirrorKinds is every record kind variant v's traces hold but the inputs,
// by its record schedule over its edge configurations, full traces and
// timing ones: the steps whose phases the source must mark.
func mirrorKinds(t *testing.T, rng *rand.Rand, v instrument.Variant) []instrument.Kind {
	seen := map[instrument.Kind]bool{}
	for _, c := range edgeConfigs(rng, v) {
		for _, timing := range []bool{false, true} {
			c.Timing = timing
			if c.Validate() != nil && !timing {
				continue
			}
			for i := range c.Tr() {
				for _, kc := range Info(v).records(&c, i) {
					seen[kc.kind] = seen[kc.kind] || (kc.kind != instrument.KindInputs && kc.n > 0)
				}
			}
		}
	}
	var out []instrument.Kind
	for k, ok := range seen {
		if ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Errorf("%v: its schedule holds no step on any edge configuration", v)
	}
	return out
}
