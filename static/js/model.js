// The trace as the stepper sees it: the inputs of each traced batch-head and
// the steps (every record that is neither inputs nor a warp role's span) in
// kernel order, with running byte counts and an index from (batch-head,
// q-tile) to its steps. A roles trace's role records are kept apart, by
// block, so that its steps are exactly a timing trace's. It grows as
// records stream in.
import { materialises } from './steps.js';
import { BackwardState, isBackward, tileStates as backwardTileStates } from './backward_model.js';
import { isSplitKind, splitLayout, splitOfTile, splitRule } from './splits.js';

export class TraceModel {
  constructor(header) {
    this.h = header;
    this.inputs = new Map(); // bh -> {q, k, v}
    this.steps = [];
    this.cumRead = [];
    this.cumWritten = [];
    this.blockStart = new Map(); // "bh,i" -> first step index
    this.finalO = new Map(); // bh -> Float32Array Nq*D (a row per query), NaN until its q-tile's epilogue
    this.finalLSE = new Map();
    this.epilogueAt = new Map(); // "bh,i" -> step index of its epilogue
    this.absMax = new Map(); // cache of max |value| per "bh,array"
    this.visited = new Set(); // "bh,i,j" of every flash step received
    this.backward = isBackward(header) ? new BackwardState(header) : null; // a backward trace's rows and dQ
    this.roles = new Map(); // "bh,i" -> the block's role records, in trace order (a roles trace's)
    this.roleRecords = 0;
    this.stepOf = new Map(); // "bh,i,j" -> step index of a timing record (j = -1: the epilogue's)
    // Split-KV (splits.js): where the splits fall by the rung's rule, and
    // per block ("bh,i") the step index of each split's end and merge and
    // of its flash steps, by split; a flash step's split.
    this.splitRule = splitRule(header);
    this.hasSplits = this.splitRule !== null;
    this.splitEnds = new Map(); // "bh,i" -> [s] step index of split s's split_end
    this.merges = new Map(); // "bh,i" -> [s] step index of split s's merge record
    this.splitSteps = new Map(); // "bh,i" -> [s] the step indexes of split s's flash steps
    this.stepSplit = new Map(); // step index of a flash step (or a timing record of one) -> its split
    this.timingSplit = new WeakMap(); // a split rung's timing record without a kv-tile -> { kind, s } it stands for
    this.closings = new Map(); // "bh,i" -> how many timing records without a kv-tile it has had
  }

  add(r) {
    if (r.kind === 'inputs') {
      this.inputs.set(r.bh, { q: r.q, k: r.k, v: r.v });
      return;
    }
    if (r.kind === 'role') {
      // Not a step: a span of one warp role of a block, drawn beside the
      // block's steps (RoleLanes).
      const key = `${r.bh},${r.i}`;
      if (!this.roles.has(key)) this.roles.set(key, []);
      this.roles.get(key).push(r);
      this.roleRecords++;
      return;
    }
    const k = this.steps.length;
    this.steps.push(r);
    this.cumRead.push((k ? this.cumRead[k - 1] : 0) + r.bytesRead);
    this.cumWritten.push((k ? this.cumWritten[k - 1] : 0) + r.bytesWritten);
    const key = `${r.bh},${r.i}`;
    if (!this.blockStart.has(key)) this.blockStart.set(key, k);
    if (this.backward) {
      // A backward's blocks are kv-tiles: the selector jumps to a block's
      // first step.
      if (r.kind === 'bwd_step' && !this.blockStart.has(`${r.bh},kv${r.j}`)) this.blockStart.set(`${r.bh},kv${r.j}`, k);
      this.backward.add(r, k);
    }
    if (r.kind === 'flash_step' || (r.kind === 'timing' && r.j >= 0)) this.visited.add(`${r.bh},${r.i},${r.j}`);
    // A split rung's timing trace closes a block with a record without a
    // kv-tile per split's end, then per merge, then the epilogue's.
    const closing = this.addSplit(r, k, key);
    if (r.kind === 'timing' && !closing) this.stepOf.set(`${key},${r.j}`, k);
    if (r.kind === 'timing' && r.j < 0 && !closing) this.epilogueAt.set(key, k);
    if (r.kind === 'epilogue') {
      this.epilogueAt.set(key, k);
      const { Nq, D, Br } = this.h;
      if (!this.finalO.has(r.bh)) {
        this.finalO.set(r.bh, new Float32Array(Nq * D).fill(NaN));
        this.finalLSE.set(r.bh, new Float32Array(Nq).fill(NaN));
      }
      const o = this.finalO.get(r.bh);
      const lse = this.finalLSE.get(r.bh);
      for (let row = 0; row < r.rowsValid; row++) {
        o.set(r.o.subarray(row * D, (row + 1) * D), (r.i * Br + row) * D);
        lse[r.i * Br + row] = r.lse[row];
      }
    }
    this.absMax.clear();
  }

  // addSplit files a split-KV step (splits.js) under its block and split.
  // It says whether r is a timing record that stands for a split's end or
  // a merge (not a block's epilogue).
  addSplit(r, k, key) {
    if (isSplitKind(r.kind)) {
      if (!this.hasSplits) {
        // The first split record of a rung without the rule: every flash
        // step so far was of its block's split 0.
        this.hasSplits = true;
        this.steps.forEach((q, n) => { if (n < k && q.kind === 'flash_step') this.addSplit(q, n, `${q.bh},${q.i}`); });
      }
      const by = r.kind === 'split_end' ? this.splitEnds : this.merges;
      if (!by.has(key)) by.set(key, []);
      by.get(key)[r.j] = k;
      return false;
    }
    if (!this.hasSplits) return false;
    if (r.kind === 'flash_step' || (r.kind === 'timing' && r.j >= 0)) {
      // The rule's split of the kv-tile; without one, the splits this
      // block has ended so far.
      const s = this.splitRule ? splitOfTile(this.splitRule, r.j) : (this.splitEnds.get(key) ?? []).length;
      this.stepSplit.set(k, s);
      if (!this.splitSteps.has(key)) this.splitSteps.set(key, []);
      const lists = this.splitSteps.get(key);
      (lists[s] ??= []).push(k);
      return false;
    }
    if (r.kind === 'timing' && r.j < 0 && this.splitRule) {
      const n = this.closings.get(key) ?? 0, S = this.splitRule.splits;
      this.closings.set(key, n + 1);
      if (n < 2 * S) {
        this.timingSplit.set(r, { kind: n < S ? 'split_end' : 'merge', s: n % S });
        return true;
      }
    }
    return false;
  }

  // splits is the trace's split layout (splits.js), or null.
  get splits() { return splitLayout(this.h, this); }

  get length() { return this.steps.length; }

  // maxAbs is the largest finite |value| of an array over every step of a
  // batch-head (of one kind, if given), so a view keeps one colour scale
  // while stepping.
  maxAbs(bh, name, kind = null) {
    const key = `${bh},${name},${kind}`;
    if (this.absMax.has(key)) return this.absMax.get(key);
    let m = 0;
    const scan = (a) => { for (const v of a) if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v); };
    if (name === 'q' || name === 'k' || name === 'v') {
      const inp = this.inputs.get(bh);
      if (inp) scan(inp[name]);
    } else {
      for (const s of this.steps) if (s.bh === bh && s[name] && (!kind || s.kind === kind)) scan(s[name]);
    }
    this.absMax.set(key, m || 1);
    return m || 1;
  }

  // tileStates says, at step k, what has happened to each score tile (i, j)
  // of that step's batch-head: 'current', 'done', 'pending', 'untraced', or
  // 'skipped' when the kernel has finished that q-tile, by step k, without
  // visiting the tile
  // (fully masked). For naive, 'stored' means the S tile sits in device
  // memory, 'normalised' that its rows have been through the softmax, and
  // 'consumed' that P·V has read it (S and P still sit in device memory).
  // For naive_row, 'scanned' means pass 1 has taken the tile's row maxima.
  tileStates(k) {
    if (this.backward) return backwardTileStates(this, k);
    const h = this.h;
    const cur = this.steps[k];
    const states = new Array(h.Tr * h.Tc).fill('pending');
    if (!cur) return states;
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        if (i < h.tracedQ[0] || i >= h.tracedQ[1]) states[i * h.Tc + j] = 'untraced';
        // Skipped once its q-tile has finished without it, by this step: a
        // stepper does not know the future.
        else if (!materialises(h.variant) && this.epilogueAt.get(`${cur.bh},${i}`) <= k && !this.visited.has(`${cur.bh},${i},${j}`)) states[i * h.Tc + j] = 'skipped';
      }
    }
    for (let s = 0; s <= k; s++) {
      const r = this.steps[s];
      if (r.bh !== cur.bh) continue;
      if (r.kind === 'flash_step' || (r.kind === 'timing' && r.j >= 0)) states[r.i * h.Tc + r.j] = 'done';
      else if (r.kind === 'pv') states[r.i * h.Tc + r.j] = 'consumed';
      else if (r.kind === 'scores') states[r.i * h.Tc + r.j] = materialises(h.variant) ? 'stored' : 'scanned';
      else if (r.kind === 'softmax') for (let j = 0; j < h.Tc; j++) states[r.i * h.Tc + j] = 'normalised';
    }
    // A split's end or merge (j a split, not a kv-tile): the tiles of the
    // split its block walked.
    const split = isSplitKind(cur.kind) ? cur.j : this.timingSplit.get(cur)?.s;
    if (split !== undefined) {
      for (const q of this.splitSteps.get(`${cur.bh},${cur.i}`)?.[split] ?? []) if (q <= k) states[cur.i * h.Tc + this.steps[q].j] = 'current-split';
    } else if (cur.j >= 0) states[cur.i * h.Tc + cur.j] = 'current';
    else for (let j = 0; j < h.Tc; j++) if (states[cur.i * h.Tc + j] !== 'skipped') states[cur.i * h.Tc + j] = 'current-row';
    return states;
  }
}
