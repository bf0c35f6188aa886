// Split-KV decoding (flash-decoding: the decode_split and decode_paged rungs) as the pages
// read it: each (batch-head, q-tile) cuts its kv-tiles into splits, walks
// each from a fresh m, l and O (its flash steps), ends each with its
// partial O_s and LSE_s (a split_end record), and a second kernel merges
// them, split by split, with weights w_s = exp(LSE_s − LSE) (a merge record
// each) before the epilogue writes the final O and LSE. Nothing here
// touches the page: Node's tests import it.
//
// Where the splits fall is a rule of the run's shape alone
// (kernels.DecodeSplits, mirrored here and held to it by a fixture the Go
// side writes); a trace of another rung that holds split records has its
// splits read from its records instead.

import { rung } from './rungs.js';

// DECODE_SMS and DECODE_BLOCKS_PER_SM are kernels.DecodeSMs and
// DecodeBlocksPerSM: the one wave of blocks DecodeSplits aims to fill.
export const DECODE_SMS = 132;
export const DECODE_BLOCKS_PER_SM = 2;

// splitsByRule: the rung's splits follow decodeSplits (the registry says
// so: kernels.PageRung's splits).
const splitsByRule = (variant) => rung(variant)?.splits === true;

// isSplitKind: a record whose j is a split, not a kv-tile.
export const isSplitKind = (kind) => kind === 'split_end' || kind === 'merge';

// decodeSplits is kernels.DecodeSplits for a header (batch, kvHeads, Tr,
// Tc): splits of per kv-tiles each (the last may be shorter), as many as one
// wave of DECODE_SMS·DECODE_BLOCKS_PER_SM blocks holds, never more than the
// kv-tiles.
export function decodeSplits(h) {
  const blocks = h.batch * h.kvHeads * h.Tr;
  const want = Math.min(h.Tc, Math.max(1, Math.floor(DECODE_SMS * DECODE_BLOCKS_PER_SM / blocks)));
  const per = Math.ceil(h.Tc / want);
  return { splits: Math.ceil(h.Tc / per), per };
}

// splitRule is the layout of a split rung's trace from its header alone:
// { splits, per, ranges }, ranges[s] = [j0, j1) the kv-tiles split s owns;
// null for any other rung.
export function splitRule(h) {
  if (!splitsByRule(h.variant)) return null;
  const { splits, per } = decodeSplits(h);
  const ranges = Array.from({ length: splits }, (_, s) => [s * per, Math.min(h.Tc, (s + 1) * per)]);
  return { splits, per, ranges, from: 'rule' };
}

// splitLayout is the layout the page draws: the rule's, or for a trace of
// another rung holding split records, the kv-tiles its records put in each
// split (ranges[s] null where no block walked split s yet); null for a trace
// without splits.
export function splitLayout(h, m = null) {
  const rule = splitRule(h);
  if (rule) return rule;
  if (!m?.hasSplits) return null;
  let splits = 0;
  for (const list of [...m.splitEnds.values(), ...m.merges.values()]) splits = Math.max(splits, list.length);
  const ranges = Array.from({ length: splits }, () => null);
  for (const lists of m.splitSteps.values()) {
    lists.forEach((ks, s) => {
      for (const k of ks ?? []) {
        const j = m.steps[k].j;
        if (s >= ranges.length) ranges.length = s + 1;
        ranges[s] = ranges[s] ? [Math.min(ranges[s][0], j), Math.max(ranges[s][1], j + 1)] : [j, j + 1];
      }
    });
  }
  return { splits: ranges.length, per: null, ranges, from: 'records' };
}

// splitOfTile is the split that owns kv-tile j, or −1.
export function splitOfTile(layout, j) {
  if (!layout) return -1;
  if (layout.per) return Math.floor(j / layout.per);
  return layout.ranges.findIndex((r) => r && j >= r[0] && j < r[1]);
}

// splitKeys is split s's keys, [first, last] (of N); null where unknown.
export function splitKeys(h, layout, s) {
  const r = layout?.ranges[s];
  return r ? [r[0] * h.Bc, Math.min(h.N, r[1] * h.Bc) - 1] : null;
}

// keysWords is split s's keys in words, "keys 64–127".
export function keysWords(h, layout, s) {
  const k = splitKeys(h, layout, s);
  return k ? `keys ${k[0]}–${k[1]}` : 'its keys';
}

// SPLIT_BAND is the height, in CSS pixels, of the band above the tile grid
// that names the splits.
export const SPLIT_BAND = 16;

// splitBands lays the splits out over a tile grid's geometry (shape.js's
// gridGeometry): each split's columns, x0 to x1 in CSS pixels, and the
// boundaries between splits, the x where a split other than the first
// starts (a kv-tile column's edge).
export function splitBands(h, layout, geo) {
  if (!layout) return { bands: [], boundaries: [] };
  const bands = [];
  layout.ranges.forEach((r, s) => {
    if (!r) return;
    bands.push({ s, j0: r[0], j1: r[1], x0: r[0] * h.Bc * geo.px, x1: Math.min(h.N, r[1] * h.Bc) * geo.px });
  });
  const boundaries = bands.filter((b) => b.j0 > 0).map((b) => b.x0);
  return { bands, boundaries };
}

// splitOfStep is the split step k belongs to (a flash step's, a split
// end's or a merge's, or a timing record's of one), or −1.
export function splitOfStep(m, k) {
  const r = m.steps[k];
  if (!r) return -1;
  if (isSplitKind(r.kind)) return r.j;
  return m.timingSplit.get(r)?.s ?? m.stepSplit.get(k) ?? -1;
}

// startsSplit says whether flash step k (or a timing record of one) is
// its split's first: where m, l
// and O start afresh (m = −∞, l = 0, O = 0) rather than carry the previous
// kv-tile's, which belonged to the split before.
export function startsSplit(m, k) {
  const r = m.steps[k];
  if (!r || !(r.kind === 'flash_step' || (r.kind === 'timing' && r.j >= 0)) || !m.hasSplits) return false;
  const s = m.stepSplit.get(k);
  return s !== undefined && m.splitSteps.get(`${r.bh},${r.i}`)?.[s]?.[0] === k;
}

// mergeState is what the merge view shows at step k for row x of the
// step's q-tile (0 ≤ x < Br): per split, its keys, the kv-tiles its block
// walked, its LSE_s and partial O_s row once its split_end is at or before
// k, its weight w_s once its merge record is; the whole row's LSE and the
// merged O row so far (the last merge record at or before k), Σ w_s over
// the splits merged so far; the epilogue's O row once it is reached. Every
// number is the trace's; checks (named so) are worked out from them in
// float64: exp(LSE_s − LSE) beside each w_s, log Σ_s exp(LSE_s) beside
// the LSE, and how far the epilogue's O lies from the last merge's.
export function mergeState(m, k, x) {
  const h = m.h, r = m.steps[k];
  if (!r || r.i < 0) return null;
  const key = `${r.bh},${r.i}`;
  const layout = splitLayout(h, m);
  if (!layout) return null;
  const ends = m.splitEnds.get(key) ?? [], merges = m.merges.get(key) ?? [], walks = m.splitSteps.get(key) ?? [];
  const D = h.D;
  const at = (list, s) => (list[s] !== undefined && list[s] <= k ? m.steps[list[s]] : null);
  let last = null, lastS = -1;
  for (let s = 0; s < layout.splits; s++) {
    const mg = at(merges, s);
    if (mg) { last = mg; lastS = s; }
  }
  const lse = last ? last.lse[x] : null;
  const splits = [];
  let wSum = null;
  for (let s = 0; s < layout.splits; s++) {
    const end = at(ends, s), mg = at(merges, s);
    const walked = (walks[s] ?? []).filter((q) => q <= k).map((q) => m.steps[q].j);
    const row = {
      s, keys: splitKeys(h, layout, s), walked: walked.length ? [walked[0], walked.at(-1)] : null,
      ended: Boolean(end), merged: Boolean(mg),
      lse: end ? end.lse[x] : null,
      o: end ? end.o.subarray(x * D, (x + 1) * D) : null,
      w: mg ? mg.w[x] : null,
      // A check: the weight from the two log-sum-exps the trace holds.
      wCheck: end && lse !== null && Number.isFinite(lse) ? Math.exp(end.lse[x] - lse) : null,
    };
    if (mg) wSum = (wSum ?? 0) + mg.w[x];
    splits.push(row);
  }
  const ended = splits.filter((p) => p.ended);
  // A check: the row's LSE from the splits' (log Σ exp, max first).
  let lseCheck = null;
  if (ended.length === layout.splits) {
    const top = Math.max(...ended.map((p) => p.lse));
    lseCheck = top === -Infinity ? -Infinity : top + Math.log(ended.reduce((a, p) => a + Math.exp(p.lse - top), 0));
  }
  const epiK = m.epilogueAt.get(key);
  const epi = epiK !== undefined && epiK <= k && m.steps[epiK].kind === 'epilogue' ? m.steps[epiK] : null;
  const merged = last ? last.o.subarray(x * D, (x + 1) * D) : null;
  // A check: how far the epilogue's O row lies from the last merge's (0
  // where the merge kernel wrote what it summed).
  let finalDiff = null;
  if (epi && last && lastS === layout.splits - 1) {
    const fin = epi.o.subarray(x * D, (x + 1) * D);
    finalDiff = merged.reduce((a, v, c) => Math.max(a, Math.abs(v - fin[c])), 0);
  }
  return {
    bh: r.bh, i: r.i, x, row: r.i * h.Br + x, layout, splits, lse, lseCheck, merged, mergedThrough: lastS, wSum,
    final: epi ? epi.o.subarray(x * D, (x + 1) * D) : null, finalLSE: epi ? epi.lse[x] : null, finalDiff,
  };
}
