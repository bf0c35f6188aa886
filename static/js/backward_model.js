// A backward trace as the pages read it (kernels/flash2_bwd.go): which
// kernels are backward ones, the phases a backward step lights, what each
// score tile's state is at a step, the rows' dO, O, L, D and dQ as their
// records arrive, and the finished gradients. Nothing here touches the page:
// the trace model (model.js) and Node's tests import it.
import { rung } from './rungs.js';
import { firstQTile } from './shape.js';

// isBackward says whether a trace's kernel is a backward one.
export const isBackward = (h) => Boolean(rung(h.variant)?.backward);

// stepKey names the phases a backward step lights (kernels.BwdStepPhases):
// the block's first q-tile loads K_j and V_j, its last writes dK_j and dV_j.
export function stepKey(h, r) {
  if (r.kind !== 'bwd_step') return r.kind;
  const first = r.i === firstQTile(h, r.j), last = r.i === h.Tr - 1;
  return first && last ? 'bwd_step:only' : first ? 'bwd_step:first' : last ? 'bwd_step:last' : 'bwd_step';
}

// tileStates is TraceModel.tileStates for a backward trace: a tile is done
// once its block has used it, skipped (wholly above the diagonal) once its
// block has begun without it; a pre or dq step lights its q-tile's row.
export function tileStates(m, k) {
  const h = m.h;
  const cur = m.steps[k];
  const states = new Array(h.Tr * h.Tc).fill('pending');
  if (!cur) return states;
  const begun = new Set();
  for (let s = 0; s <= k; s++) {
    const r = m.steps[s];
    if (r.bh !== cur.bh) continue;
    if (r.kind === 'bwd_step' || (r.kind === 'timing' && r.j >= 0)) {
      states[r.i * h.Tc + r.j] = 'done';
      begun.add(r.j);
    } else if (r.kind === 'bwd_dp') states[r.i * h.Tc + r.j] = 'stored'; // the naive backward's: dP written
    else if (r.kind === 'bwd_ds') for (let j = 0; j < h.Tc; j++) states[r.i * h.Tc + j] = 'normalised'; // dS written
    else if (r.kind === 'bwd_kv') states[r.i * h.Tc + r.j] = 'consumed'; // P and dS read back
  }
  for (let i = 0; i < h.Tr; i++) {
    for (let j = 0; j < h.Tc; j++) {
      if (i < h.tracedQ[0] || i >= h.tracedQ[1]) states[i * h.Tc + j] = 'untraced';
      else if (begun.has(j) && i < firstQTile(h, j)) states[i * h.Tc + j] = 'skipped';
    }
  }
  if (cur.j >= 0) states[cur.i * h.Tc + cur.j] = 'current';
  else for (let j = 0; j < h.Tc; j++) if (states[cur.i * h.Tc + j] !== 'skipped') states[cur.i * h.Tc + j] = 'current-row';
  return states;
}

// BackwardState is what a backward trace gives beyond its steps, per
// batch-head: dO, O, L and D of the rows whose pre step has arrived, and
// dQ of the rows whose dq step has.
export class BackwardState {
  constructor(h) {
    this.h = h;
    this.rows = new Map(); // bh -> { dO, o, l, d }, a row per query (Nq)
    this.dq = new Map(); // bh -> Float32Array Nq×D, NaN until written
    this.dqAt = new Map(); // "bh,i" -> step index of its dq
    this.stepsOfQ = new Map(); // "bh,i" -> step indices of its bwd_steps
    this.naive = Boolean(rung(h.variant)?.materialised); // reads the forward's P back
  }

  add(r, k) {
    const { Nq, D, Br } = this.h;
    if (r.kind === 'bwd_pre') {
      if (!this.rows.has(r.bh)) {
        this.rows.set(r.bh, { dO: new Float32Array(Nq * D).fill(NaN), o: new Float32Array(Nq * D).fill(NaN),
          l: new Float32Array(Nq).fill(NaN), d: new Float32Array(Nq).fill(NaN) });
      }
      const t = this.rows.get(r.bh);
      for (let x = 0; x < r.rowsValid; x++) {
        const g = r.i * Br + x;
        t.dO.set(r.do.subarray(x * D, (x + 1) * D), g * D);
        t.o.set(r.o.subarray(x * D, (x + 1) * D), g * D);
        t.l[g] = r.lse[x];
        t.d[g] = r.delta[x];
      }
    } else if (r.kind === 'bwd_ds') {
      // The naive backward's D, from whole rows of P and dP; it reads no
      // O or L.
      if (!this.rows.has(r.bh)) this.rows.set(r.bh, { dO: null, o: null, l: null, d: new Float32Array(Nq).fill(NaN) });
      const t = this.rows.get(r.bh);
      for (let x = 0; x < r.rowsValid; x++) t.d[r.i * Br + x] = r.delta[x];
    } else if (r.kind === 'bwd_step') {
      const key = `${r.bh},${r.i}`;
      if (!this.stepsOfQ.has(key)) this.stepsOfQ.set(key, []);
      this.stepsOfQ.get(key).push(k);
    } else if (r.kind === 'bwd_dq') {
      if (!this.dq.has(r.bh)) this.dq.set(r.bh, new Float32Array(Nq * D).fill(NaN));
      this.dq.get(r.bh).set(r.dq.subarray(0, r.rowsValid * D), r.i * Br * D);
      this.dqAt.set(`${r.bh},${r.i}`, k);
    }
  }
}

// gradients reads a finished backward trace's dQ (Nq×D), dK and dV (N×D, a
// row per key) of batch-head bh
// (kernels.TraceGradients): dQ from the dq steps, dK (× 1/√d, as the kernel
// writes it) and dV from each kv-tile's last step. Null until the trace
// holds them all.
export function gradients(m, bh) {
  const h = m.h;
  const dq = m.backward?.dq.get(bh);
  if (!dq || dq.some(Number.isNaN)) return null;
  const dk = new Float32Array(h.N * h.D).fill(NaN), dv = new Float32Array(h.N * h.D).fill(NaN);
  for (const r of m.steps) {
    if (r.bh !== bh || (r.kind !== 'bwd_step' && r.kind !== 'bwd_kv') || r.i !== h.Tr - 1) continue;
    for (let e = 0; e < r.colsValid * h.D; e++) {
      dk[r.j * h.Bc * h.D + e] = Math.fround(r.dk[e] * h.scale);
      dv[r.j * h.Bc * h.D + e] = r.dv[e];
    }
  }
  if (dk.some(Number.isNaN)) return null;
  return { dq, dk, dv };
}
