// The numbers a lesson's checkpoint holds back that name their checkpoint
// (lessons.Hold with Of and By): what the hold in the embedded stepper's
// URL says, which of a step's numbers it keeps back, and its release.
// Nothing here touches the page: the stepper keeps the page's holds
// (stepper_page.js) and Node's tests import this.
//
// hold=WHAT.BH.ROW.STEP.ID holds row ROW (of the run's query rows, not of
// its q-tile) of batch-head BH from step STEP (from 1) on, as "?", until
// checkpoint ID is answered:
//   psum:  a backward run's sums of p, and the row's p in the P tile, at
//          the steps after STEP (they would tell what the later kv-tiles
//          add);
//   dq:    a backward run's finished dQ row, from its q-tile's last pass
//          (STEP) on;
//   merge: a split-KV run's merge of the row (the weights wₛ, the row's
//          LSE, the merged O and the epilogue's O), from its q-tile's
//          first merge step (STEP) on; each split's LSEₛ and Oₛ, which the
//          question gives, stay.

// KINDS are the holds that name their checkpoint.
export const KINDS = ['psum', 'dq', 'merge'];

// parseHolds reads a URL's hold= value: for each kind, "bh.row" -> the
// holds of that row, [{ step, by }] (two checkpoints may hold one row).
// Parts of other shapes (a forward run's bh.row.step, a roles run's
// roles.bh.q.step) are the stepper's own and left out here.
export function parseHolds(hold) {
  const holds = Object.fromEntries(KINDS.map((w) => [w, new Map()]));
  for (const part of (hold || '').split(',')) {
    const [what, ...rest] = part.split('.');
    if (!KINDS.includes(what) || rest.length < 3 || rest.slice(0, 3).some((x) => !/^\d+$/.test(x))) continue;
    const [bh, row, step] = rest.slice(0, 3).map(Number);
    const key = `${bh}.${row}`;
    const list = holds[what].get(key) ?? [];
    list.push({ step, by: rest.slice(3).join('.') });
    holds[what].set(key, list);
  }
  return holds;
}

// isHeld says whether row (of the run's query rows) of batch-head bh is
// held as `what` at step k (counted from 0): psum after the hold's step,
// dq and merge from it.
export function isHeld(holds, what, bh, row, k) {
  const list = holds[what]?.get(`${bh}.${row}`);
  if (!list) return false;
  return list.some((h) => (what === 'psum' ? k + 1 > h.step : k + 1 >= h.step));
}

// anyHeld says whether any row of batch-head bh is held as `what` at step k.
export function anyHeld(holds, what, bh, k) {
  for (const key of holds[what]?.keys() ?? []) {
    const [b, row] = key.split('.').map(Number);
    if (b === bh && isHeld(holds, what, b, row, k)) return true;
  }
  return false;
}

// holdCount is how many holds there are.
export function holdCount(holds) {
  let n = 0;
  for (const w of KINDS) for (const list of holds[w].values()) n += list.length;
  return n;
}

// letGo drops the holds of the checkpoints answered (a set of ids), and
// says whether any went: the step shown then is drawn again.
export function letGo(holds, answered) {
  let changed = false;
  for (const w of KINDS) {
    for (const [key, list] of holds[w]) {
      const kept = list.filter((h) => !(h.by && answered.has(h.by)));
      if (kept.length === list.length) continue;
      changed = true;
      if (kept.length) holds[w].set(key, kept);
      else holds[w].delete(key);
    }
  }
  return changed;
}

// clearHolds drops every hold (the lesson released the widget:
// flashstep-release).
export function clearHolds(holds) {
  for (const w of KINDS) holds[w].clear();
}

// mergeHolds is what a merge hold keeps back of row (of the run's query
// rows) on step r (the k-th, from 0), by the rows table's and the O tile's
// names: on a merge, the row's LSE, its weight w and its O row (the
// merge so far); on the epilogue, its LSE and its O row (the merged
// output). null where nothing of the row is held: before the hold's step,
// on another row, on a split's end or flash step (Oₛ and LSEₛ, which the
// question gives).
export function mergeHolds(holds, r, row, k) {
  if (!isHeld(holds, 'merge', r.bh, row, k)) return null;
  if (r.kind === 'merge') return new Set(['o', 'lse', 'w']);
  if (r.kind === 'epilogue') return new Set(['o', 'lse']);
  return null;
}

// mergeHeldRows says, for each valid row x of step r's q-tile (Br rows a
// tile), whether a merge hold keeps its O row back at step k: the O tile
// of a merge or the epilogue draws those rows as "?".
export function mergeHeldRows(holds, r, br, k) {
  return Array.from({ length: r.rowsValid }, (_, x) => mergeHolds(holds, r, r.i * br + x, k)?.has('o') ?? false);
}

// withholdMerge is the merge view's state (splits.js's mergeState) with
// every number that gives the merge away taken out: each split's weight
// wₛ and its check, the row's LSE and its check, Σ wₛ, the merged O so
// far, the epilogue's O and LSE and how far they lie from the merge's.
// Each split's LSEₛ and Oₛ stay. held says which of the view's rows are
// there to show as "?": the merged row (once a merge is reached), the
// final row (once the epilogue is), and each merged split's weight.
export function withholdMerge(st) {
  if (!st) return st;
  return {
    ...st,
    splits: st.splits.map((p) => ({ ...p, w: null, wCheck: null })),
    lse: null, lseCheck: null, wSum: null, merged: null, final: null, finalLSE: null, finalDiff: null,
    held: { merged: st.mergedThrough >= 0, final: st.final !== null },
  };
}
