// The side by side's arithmetic: each pane's steps placed on one progress
// axis (from 0 to 1, the fraction of its score tiles computed so far; from
// 1 to 2, its steps after the last score tile), the places either kernel
// reaches, the step a pane shows at a place, its running traffic, and
// attention in float64 to hold both outputs to. Nothing here touches the
// page: Node's tests import it.

// keysOf places each step of a trace model on the shared progress axis.
export function keysOf(model) {
  const steps = model.steps;
  // A tile's first pass: a score tile (a backward's recomputed S, or the
  // naive backward's dP, its first Nq×N write: N×N in a square run).
  const computesS = (r) => r.kind === 'flash_step' || r.kind === 'scores' || r.kind === 'bwd_step' || r.kind === 'bwd_dp';
  const total = steps.filter(computesS).length;
  let lastS = -1;
  steps.forEach((r, k) => { if (computesS(r)) lastS = k; });
  const after = steps.length - 1 - lastS;
  let seen = 0;
  return steps.map((r, k) => {
    if (k <= lastS) {
      if (computesS(r)) seen++;
      return seen / total;
    }
    return 1 + (k - lastS) / after;
  });
}

// positionsOf is every place on the axis a pane's keys reach, and 0,
// sorted; places closer than 1e-9 are one.
export function positionsOf(keyLists) {
  const all = new Set([0]);
  for (const keys of keyLists) keys.forEach((k) => all.add(Math.round(k * 1e9) / 1e9));
  return [...all].sort((a, b) => a - b);
}

// stepAt is the last step whose key is at or before place x, or −1.
export function stepAt(keys, x) {
  let k = -1;
  while (k + 1 < keys.length && keys[k + 1] <= x + 1e-12) k++;
  return k;
}

// cumulative sums a run's traffic per step ([L2 read, L2 written, DRAM
// read, DRAM written]) into running totals.
export function cumulative(steps) {
  const out = [];
  let r = 0, w = 0, dr = 0, dw = 0;
  for (const s of steps) {
    r += s[0]; w += s[1]; dr += s[2]; dw += s[3];
    out.push([r, w, dr, dw]);
  }
  return out;
}

// reference is attention in float64 over the float32 inputs: Nq rows of
// queries against N keys, query row r at position N − Nq + r, which under a
// causal mask sees keys 0 to N − Nq + r.
export function reference(inp, h) {
  const { N, Nq, D } = h;
  const out = new Float64Array(Nq * D);
  const s = new Float64Array(N);
  const scale = 1 / Math.sqrt(D);
  for (let r = 0; r < Nq; r++) {
    let m = -Infinity;
    const cols = h.causal ? N - Nq + r + 1 : N;
    for (let c = 0; c < cols; c++) {
      let dot = 0;
      for (let x = 0; x < D; x++) dot += inp.q[r * D + x] * inp.k[c * D + x];
      s[c] = dot * scale;
      if (s[c] > m) m = s[c];
    }
    let l = 0;
    for (let c = 0; c < cols; c++) {
      const p = Math.exp(s[c] - m);
      l += p;
      for (let x = 0; x < D; x++) out[r * D + x] += p * inp.v[c * D + x];
    }
    for (let x = 0; x < D; x++) out[r * D + x] /= l;
  }
  return out;
}
