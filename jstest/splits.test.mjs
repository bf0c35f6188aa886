// Split-KV decoding (static/js/splits.js, the model's split bookkeeping
// in model.js, the steps' words in steps.js): where the splits fall, held
// to kernels.DecodeSplits (splits.json, written by the Go side); the step
// walk of the CPU mirror's decode_split traces (each split's flash steps
// from a fresh state, then its end, then the merges and the epilogue); the
// merge view's numbers, from the trace; the tile grid's split boundaries.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { describe, sub } from '../static/js/steps.js';
import { gridGeometry, lastKvTile } from '../static/js/shape.js';
import { decodeSplits, isSplitKind, mergeState, splitBands, splitLayout, splitOfStep, splitOfTile, startsSplit } from '../static/js/splits.js';
import { bytesOf, fixture, random, useRungs } from './helpers.mjs';

useRungs();

function load(file) {
  let m = null;
  const records = [];
  const reader = new TraceReader({ onHeader: (h) => { m = new TraceModel(h); }, onRecord: (r) => { records.push(r); m.add(r); } });
  reader.push(bytesOf(`traces/${file}.fstrace`));
  assert.ok(reader.complete, file);
  return { m, h: m.h, records, name: file };
}

const TRACES = ['mirror-decode_split', 'mirror-decode_split-causal'].map(load);
const blocksOf = (m) => [...new Set(m.steps.map((r) => `${r.bh},${r.i}`))].map((k) => k.split(',').map(Number));

test('the splits fall where kernels.DecodeSplits puts them', () => {
  const cases = fixture('splits.json');
  assert.ok(cases.length > 300);
  for (const c of cases) {
    const got = decodeSplits({ batch: c.batch, kvHeads: c.kvHeads, Tr: c.Tr, Tc: c.Tc });
    assert.deepEqual(got, { splits: c.splits, per: c.per }, JSON.stringify(c));
  }
  // The fixtures' own shapes: 4 splits of one kv-tile; 3 of 3.
  assert.deepEqual(TRACES.map(({ m }) => [m.splits.splits, m.splits.per]), [[4, 1], [3, 3]]);
  // A trace of another rung has no splits until a split record says so.
  assert.strictEqual(splitLayout({ ...TRACES[0].h, variant: 'flash2' }), null);
});

test('each block walks its splits in order: a split\'s flash steps, its end; then the merges and the epilogue', () => {
  for (const { m, h, name } of TRACES) {
    const L = m.splits;
    // The split kernel's records (phase 0) all come before the merge
    // kernel's (phase 1), as the two launches run.
    const firstMerge = m.steps.findIndex((r) => r.kind === 'merge');
    assert.ok(firstMerge > 0, name);
    assert.ok(m.steps.slice(0, firstMerge).every((r) => r.kind === 'flash_step' || r.kind === 'split_end'), `${name}: phase 0`);
    assert.ok(m.steps.slice(firstMerge).every((r) => r.kind === 'merge' || r.kind === 'epilogue'), `${name}: phase 1`);
    let blocks = 0;
    for (const [bh, i] of blocksOf(m)) {
      const mine = m.steps.map((r, k) => ({ r, k })).filter(({ r }) => r.bh === bh && r.i === i);
      // What the block's walk must be: split s's kv-tiles up to the last
      // one the q-tile sees, then its end; a merge per split; the epilogue.
      const want = [];
      for (let s = 0; s < L.splits; s++) {
        for (let j = s * L.per; j < Math.min((s + 1) * L.per, lastKvTile(h, i) + 1); j++) want.push(`flash_step ${j}`);
        want.push(`split_end ${s}`);
      }
      for (let s = 0; s < L.splits; s++) want.push(`merge ${s}`);
      want.push('epilogue -1');
      assert.deepEqual(mine.map(({ r }) => `${r.kind} ${r.j}`), want, `${name}: block (${bh}, ${i})`);
      // The model's indexes of the block.
      const key = `${bh},${i}`;
      for (const { r, k } of mine) {
        if (r.kind === 'split_end') assert.strictEqual(m.splitEnds.get(key)[r.j], k);
        if (r.kind === 'merge') assert.strictEqual(m.merges.get(key)[r.j], k);
        if (r.kind === 'flash_step') {
          assert.strictEqual(splitOfStep(m, k), Math.floor(r.j / L.per), `${name}: step ${k}'s split`);
          assert.ok(m.splitSteps.get(key)[splitOfStep(m, k)].includes(k));
        }
        if (isSplitKind(r.kind)) assert.strictEqual(splitOfStep(m, k), r.j);
      }
      assert.strictEqual(m.epilogueAt.get(key), mine.at(-1).k);
      blocks++;
    }
    assert.ok(blocks >= 2, name);
  }
});

test('at a split\'s first kv-tile m, l and O start afresh; within a split they carry', () => {
  let starts = 0, carried = 0;
  for (const { m, h, name } of TRACES) {
    const prev = new Map(); // block -> its last flash step
    m.steps.forEach((r, k) => {
      if (r.kind !== 'flash_step') return;
      const key = `${r.bh},${r.i}`;
      const first = r.j % m.splits.per === 0;
      assert.strictEqual(startsSplit(m, k), first, `${name}: step ${k} (kv-tile ${r.j}) starts a split`);
      for (let x = 0; x < r.rowsValid; x++) {
        // l after the step is α·l_old + Σ p: from l_old = 0 at a split's
        // start, whatever the kv-tile before left.
        const sumP = Array.from(r.p.subarray(x * h.Bc, x * h.Bc + r.colsValid)).reduce((a, v) => a + v, 0);
        if (first) {
          assert.strictEqual(r.m_old[x], -Infinity, `${name}: m_old at step ${k}`);
          assert.ok(Math.abs(r.l[x] - sumP) <= 1e-5 * Math.max(1, sumP), `${name}: l at step ${k} is Σp of the tile alone: ${r.l[x]}, ${sumP}`);
        } else {
          const before = prev.get(key);
          assert.strictEqual(r.m_old[x], before.m_new[x], `${name}: m_old at step ${k} carries the split's m`);
          const want = r.alpha[x] * before.l[x] + sumP;
          assert.ok(Math.abs(r.l[x] - want) <= 1e-5 * Math.max(1, want), `${name}: l at step ${k}: ${r.l[x]}, ${want}`);
          carried++;
        }
      }
      if (first) starts++;
      prev.set(key, r);
      // The words say so.
      const [title, body] = describe(h, r, undefined, m);
      assert.ok(title.includes(`split ${Math.floor(r.j / m.splits.per)},`), `${name}: ${title}`);
      assert.strictEqual(body.includes('starts from m = −∞, l = 0 and O = 0'), first, `${name}: step ${k}: ${body}`);
    });
  }
  assert.ok(starts >= 10 && carried >= 10, `${starts} split starts, ${carried} steps carried`);
});

test('a split\'s end and a merge are told with their split, keys and weight', () => {
  for (const { m, h, name } of TRACES) {
    m.steps.forEach((r, k) => {
      if (!isSplitKind(r.kind)) return;
      const [title, body] = describe(h, r, undefined, m);
      const s = r.j, first = s * m.splits.per * h.Bc, last = Math.min(h.N, (s + 1) * m.splits.per * h.Bc) - 1;
      if (r.kind === 'split_end') {
        assert.ok(title.startsWith(`Split ${s} ends: its partial O${sub(s)} and LSE${sub(s)} over keys ${first}–${last}, q-tile ${r.i}`), `${name}: ${title}`);
        // A split the causal mask hides whole ends with LSE = −∞, and says so.
        assert.strictEqual(body.includes('walked none of its kv-tiles'), r.lse[0] === -Infinity, `${name}: step ${k}: ${body}`);
      } else {
        assert.ok(title.startsWith(`Merge adds split ${s}: weight w = exp(LSE${sub(s)} − LSE)`), `${name}: ${title}`);
        assert.ok(body.includes('α = exp(m_old − m_new)'), body);
      }
      assert.ok(!/undefined|NaN|null/.test(title + body), title + body);
    });
  }
});

test('the merge view\'s numbers are the trace\'s: LSE_s, w_s, the merged O; Σ w_s = 1; the last merge\'s O is the final O', (t) => {
  const rng = random(t);
  let merges = 0, ends = 0, finals = 0;
  for (const { m, h, name } of TRACES) {
    const S = m.splits.splits;
    for (let k = 0; k < m.length; k++) {
      const r = m.steps[k];
      if (!['split_end', 'merge', 'epilogue'].includes(r.kind)) continue;
      const x = rng.int(r.rowsValid);
      const st = mergeState(m, k, x);
      const where = `${name}: step ${k} (${r.kind} ${r.j}), row ${x}`;
      assert.strictEqual(st.splits.length, S, where);
      // What has happened by step k, from the records themselves.
      const upTo = m.steps.slice(0, k + 1).filter((q) => q.bh === r.bh && q.i === r.i);
      const endOf = (s) => upTo.find((q) => q.kind === 'split_end' && q.j === s);
      const mergeOf = (s) => upTo.find((q) => q.kind === 'merge' && q.j === s);
      let wSum = 0, lastMerge = null;
      for (const p of st.splits) {
        const end = endOf(p.s), mg = mergeOf(p.s);
        assert.strictEqual(p.ended, Boolean(end), where);
        assert.strictEqual(p.merged, Boolean(mg), where);
        if (end) {
          assert.ok(Object.is(p.lse, end.lse[x]), `${where}: LSE_${p.s}`);
          assert.deepEqual(Array.from(p.o), Array.from(end.o.subarray(x * h.D, (x + 1) * h.D)), `${where}: O_${p.s}`);
        } else assert.strictEqual(p.lse, null, where);
        if (mg) {
          assert.ok(Object.is(p.w, mg.w[x]), `${where}: w_${p.s} is the trace's`);
          // The check beside it: exp(LSE_s − LSE) from the two LSEs.
          assert.ok(Math.abs(p.wCheck - mg.w[x]) <= 1e-6, `${where}: check ${p.wCheck}, w ${mg.w[x]}`);
          wSum += mg.w[x];
          lastMerge = mg;
        } else assert.strictEqual(p.w, null, where);
        // Split keys: the split's own; the kv-tiles walked, the block's.
        const walked = upTo.filter((q) => q.kind === 'flash_step' && Math.floor(q.j / m.splits.per) === p.s).map((q) => q.j);
        assert.deepEqual(p.walked, walked.length ? [walked[0], walked.at(-1)] : null, where);
        assert.deepEqual(p.keys, [p.s * m.splits.per * h.Bc, Math.min(h.N, (p.s + 1) * m.splits.per * h.Bc) - 1], where);
      }
      if (r.kind === 'split_end') {
        assert.strictEqual(st.mergedThrough, -1, `${where}: no weight before the merge kernel`);
        assert.strictEqual(st.lse, null, where);
        assert.ok(st.splits.every((p) => p.w === null), where);
        ends++;
        continue;
      }
      assert.ok(lastMerge, where);
      assert.ok(Object.is(st.lse, lastMerge.lse[x]), `${where}: the row's LSE`);
      assert.deepEqual(Array.from(st.merged), Array.from(lastMerge.o.subarray(x * h.D, (x + 1) * h.D)), `${where}: merged O`);
      assert.ok(Math.abs(st.wSum - wSum) <= 1e-12, `${where}: Σ w so far`);
      // Every merge record of a q-tile holds the same LSE.
      for (const q of upTo.filter((q) => q.kind === 'merge')) assert.ok(Object.is(q.lse[x], st.lse), where);
      if (st.mergedThrough === S - 1) {
        assert.ok(Math.abs(st.wSum - 1) <= 1e-5, `${where}: Σ w = ${st.wSum}`);
        assert.ok(Math.abs(st.lseCheck - st.lse) <= 1e-5 * Math.max(1, Math.abs(st.lse)), `${where}: log Σ exp(LSE_s) ${st.lseCheck}, LSE ${st.lse}`);
        merges++;
      }
      if (r.kind === 'epilogue') {
        assert.strictEqual(st.finalDiff, 0, `${where}: the epilogue's O is the last merge's`);
        assert.deepEqual(Array.from(st.final), Array.from(r.o.subarray(x * h.D, (x + 1) * h.D)), where);
        assert.deepEqual(Array.from(st.final), Array.from(st.merged), where);
        finals++;
      }
    }
  }
  assert.ok(ends >= 10 && merges >= 4 && finals >= 4, `${ends} split ends, ${merges} last merges, ${finals} epilogues`);
});

test('a split the causal mask hides weighs nothing', () => {
  const { m, name } = TRACES[1];
  let hidden = 0;
  for (const [bh, i] of blocksOf(m)) {
    const k = m.epilogueAt.get(`${bh},${i}`);
    const st = mergeState(m, k, 0);
    for (const p of st.splits) {
      if (p.walked) continue;
      assert.strictEqual(p.lse, -Infinity, `${name}: (${bh}, ${i}) split ${p.s}`);
      assert.strictEqual(p.w, 0, `${name}: (${bh}, ${i}) split ${p.s}`);
      hidden++;
    }
  }
  assert.strictEqual(hidden, 2, 'q-tiles 46 and 47 see none of split 2');
});

test('the tile grid\'s split boundaries are at the splits\' first kv-tiles', (t) => {
  const rng = random(t);
  const check = (h, size, where) => {
    const L = splitLayout(h);
    const geo = gridGeometry(h, size);
    const { bands, boundaries } = splitBands(h, L, geo);
    assert.strictEqual(bands.length, L.splits, where);
    assert.strictEqual(boundaries.length, L.splits - 1, where);
    bands.forEach((b, s) => {
      assert.strictEqual(b.s, s);
      assert.ok(Math.abs(b.x0 - s * L.per * h.Bc * size / h.N) < 1e-9, `${where}: split ${s} starts at ${b.x0}`);
      if (s > 0) {
        assert.strictEqual(b.x0, bands[s - 1].x1, `${where}: splits ${s - 1} and ${s} meet`);
        assert.strictEqual(boundaries[s - 1], b.x0, where);
      }
      // Every kv-tile of the band is the split's, and the tiles either
      // side of a boundary are of two splits.
      for (let j = b.j0; j < b.j1; j++) assert.strictEqual(splitOfTile(L, j), s, where);
      if (s > 0) assert.strictEqual(splitOfTile(L, b.j0 - 1), s - 1, where);
    });
    assert.strictEqual(bands[0].x0, 0, where);
    assert.ok(Math.abs(bands.at(-1).x1 - size) < 1e-9, `${where}: the last split ends at the grid's edge`);
  };
  // The fixture run: 4 splits of 1 kv-tile over 256 keys, boundaries at a
  // quarter, a half and three quarters.
  const h = TRACES[0].h;
  check(h, 400, 'mirror-decode_split');
  assert.deepEqual(splitBands(h, splitLayout(h), gridGeometry(h, 400)).boundaries, [100, 200, 300]);
  check(TRACES[1].h, 360, 'mirror-decode_split-causal');
  for (let n = 0; n < 300; n++) {
    const N = 1 + rng.int(4096), Bc = 1 + rng.int(128), Nq = 1 + rng.int(Math.min(N, 300)), Br = 1 + rng.int(16);
    const hh = { variant: 'decode_split', N, Nq, Bc, Br, batch: 1 + rng.int(16), heads: 8, kvHeads: rng.pick([1, 2, 4, 8]), Tr: Math.ceil(Nq / Br), Tc: Math.ceil(N / Bc) };
    check(hh, 120 + rng.int(600), JSON.stringify(hh));
  }
});

test('the split steps\' tiles, and a timing trace\'s closing records, as the grid and the steps show them', () => {
  // The tiles of a split's end or merge are the split's walked ones.
  const { m } = TRACES[1];
  m.steps.forEach((r, k) => {
    if (!isSplitKind(r.kind)) return;
    const states = m.tileStates(k);
    const cur = new Set(states.map((s, t) => (s === 'current-split' ? t : -1)).filter((t) => t >= 0));
    const walked = new Set(m.steps.filter((q, n) => n <= k && q.kind === 'flash_step' && q.bh === r.bh && q.i === r.i && Math.floor(q.j / m.splits.per) === r.j).map((q) => q.i * m.h.Tc + q.j));
    assert.deepEqual(cur, walked, `step ${k}`);
    assert.ok(!states.includes('current'), `step ${k}: no kv-tile is the step's own`);
  });
  // A timing trace of the rung: per block its kv-tiles' records, then one
  // without a kv-tile per split's end; then (the merge kernel) one per
  // merge and the epilogue's.
  const h = { ...m.h, timing: true, tracedQ: [0, 2], Tr: 72 };
  const tm = new TraceModel(h);
  const S = tm.splits.splits;
  const rec = (i, j) => ({ kind: 'timing', bh: 0, i, j, rowsValid: 1, colsValid: j >= 0 ? h.Bc : 0, sm: 3, bytesRead: 0, bytesWritten: 0, tStart: 0n, tEnd: 1000n });
  for (const i of [0, 1]) {
    for (let j = 0; j <= lastKvTile(h, i); j++) tm.add(rec(i, j));
    for (let s = 0; s < S; s++) tm.add(rec(i, -1));
  }
  for (const i of [0, 1]) for (let n = 0; n <= S; n++) tm.add(rec(i, -1));
  for (const i of [0, 1]) {
    const mine = tm.steps.map((r, k) => ({ r, k })).filter(({ r }) => r.i === i && r.j < 0);
    assert.strictEqual(mine.length, 2 * S + 1);
    mine.forEach(({ r, k }, n) => {
      const said = tm.timingSplit.get(r);
      if (n === 2 * S) {
        assert.strictEqual(said, undefined);
        assert.strictEqual(tm.epilogueAt.get(`0,${i}`), k, 'the epilogue is the last');
      } else {
        assert.deepEqual(said, { kind: n < S ? 'split_end' : 'merge', s: n % S });
        assert.strictEqual(splitOfStep(tm, k), n % S, 'the grid\'s current split');
      }
      const [title] = describe(h, r, undefined, tm);
      assert.ok(n === 2 * S ? title.includes('epilogue') : title.startsWith(n < S ? `Split ${n} ends` : `Merge adds split ${n - S}`), title);
    });
  }
});
