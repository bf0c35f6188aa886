// The step model (static/js/model.js, with backward_model.js for a
// backward trace) over traces the Go encoder wrote, most of them the CPU
// mirror's in each kernel's own order: the steps, the inputs and the role
// records kept apart, the running byte counts, the indexes from a block to
// its steps, the finished output, each array's colour scale, each score
// tile's state at every step, and a backward's rows, dQ and gradients.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { firstQTile } from '../static/js/steps.js';
import { gradients, isBackward } from '../static/js/backward_model.js';
import { bytesOf, fixture, fromBits, random, sameFloat32, useRungs } from './helpers.mjs';

const rungs = useRungs();
const index = fixture('traces/index.json');

// load decodes a fixture trace into a model; want is what the Go side
// wrote of it.
function load(entry) {
  const records = [];
  let h = null;
  const reader = new TraceReader({ onHeader: (x) => { h = x; }, onRecord: (r) => records.push(r) });
  reader.push(bytesOf(`traces/${entry.file}.fstrace`));
  assert.ok(reader.complete);
  const m = new TraceModel(h);
  for (const r of records) m.add(r);
  return { m, h, records, want: fixture(`traces/${entry.summary}.json`) };
}

const traces = index.traces.filter((e) => e.file === e.summary).map((e) => ({ name: e.file, ...load(e) }));
const named = (name) => traces.find((t) => t.name === name);
const isStep = (r) => r.kind !== 'inputs' && r.kind !== 'role';
const arrayOf = (wr, name) => Float32Array.from(wr.arrays.find((a) => a.name === name).bits, fromBits);

test('the model keeps every step in kernel order, and the inputs and role records apart', () => {
  for (const { name, m, records, want } of traces) {
    const steps = records.filter(isStep);
    assert.strictEqual(m.length, steps.length, `${name}: steps`);
    steps.forEach((r, k) => assert.strictEqual(m.steps[k], r, `${name}: step ${k}`));
    const inputs = new Map();
    for (const r of records) if (r.kind === 'inputs') inputs.set(r.bh, r);
    assert.deepEqual([...m.inputs.keys()].sort(), [...inputs.keys()].sort(), `${name}: the batch-heads with inputs`);
    for (const [bh, r] of inputs) {
      for (const a of ['q', 'k', 'v']) assert.strictEqual(m.inputs.get(bh)[a], r[a], `${name}: ${a} of batch-head ${bh}`);
    }
    const roles = new Map();
    for (const r of records) if (r.kind === 'role') roles.set(`${r.bh},${r.i}`, [...(roles.get(`${r.bh},${r.i}`) ?? []), r]);
    assert.strictEqual(m.roleRecords, records.filter((r) => r.kind === 'role').length, `${name}: role records`);
    assert.deepEqual([...m.roles.keys()].sort(), [...roles.keys()].sort(), `${name}: the blocks with role records`);
    for (const [key, list] of roles) {
      assert.strictEqual(m.roles.get(key).length, list.length, `${name}: role records of ${key}`);
      list.forEach((r, k) => assert.strictEqual(m.roles.get(key)[k], r, `${name}: role record ${k} of ${key}`));
    }
    // The bytes each step moved, summed as the Go side wrote them.
    const moved = want.records.filter(isStep);
    let read = 0, written = 0;
    moved.forEach((w, k) => {
      read += w.bytesRead;
      written += w.bytesWritten;
      assert.strictEqual(m.cumRead[k], read, `${name}: bytes read by step ${k}`);
      assert.strictEqual(m.cumWritten[k], written, `${name}: bytes written by step ${k}`);
    });
    assert.strictEqual(m.cumRead.length, moved.length);
  }
});

test('a block\'s first step, its epilogue and its timing records are found by its indexes', () => {
  for (const { name, m, h } of traces) {
    const start = new Map(), epilogue = new Map(), stepOf = new Map();
    m.steps.forEach((r, k) => {
      const key = `${r.bh},${r.i}`;
      if (!start.has(key)) start.set(key, k);
      if (isBackward(h) && r.kind === 'bwd_step' && !start.has(`${r.bh},kv${r.j}`)) start.set(`${r.bh},kv${r.j}`, k);
      if (r.kind === 'epilogue' || (r.kind === 'timing' && r.j < 0)) epilogue.set(key, k);
      if (r.kind === 'timing') stepOf.set(`${key},${r.j}`, k);
    });
    assert.deepEqual(new Map([...m.blockStart].sort()), new Map([...start].sort()), `${name}: blockStart`);
    assert.deepEqual(new Map([...m.epilogueAt].sort()), new Map([...epilogue].sort()), `${name}: epilogueAt`);
    assert.deepEqual(new Map([...m.stepOf].sort()), new Map([...stepOf].sort()), `${name}: stepOf`);
  }
});

test('the finished output holds each epilogue\'s rows and nothing else', () => {
  let checked = 0;
  for (const { name, m, h, want } of traces) {
    const epilogues = want.records.filter((w) => w.kind === 'epilogue');
    const bhs = [...new Set(epilogues.map((w) => w.bh))];
    assert.deepEqual([...m.finalO.keys()].sort(), bhs.sort(), `${name}: batch-heads with output`);
    for (const bh of bhs) {
      // A row per query: Nq of them (N in a square run).
      const o = new Array(h.Nq * h.D).fill(null), lse = new Array(h.Nq).fill(null);
      for (const w of epilogues.filter((x) => x.bh === bh)) {
        const wo = w.arrays.find((a) => a.name === 'o').bits, wl = w.arrays.find((a) => a.name === 'lse').bits;
        for (let row = 0; row < w.rowsValid; row++) {
          lse[w.i * h.Br + row] = wl[row];
          for (let x = 0; x < h.D; x++) o[(w.i * h.Br + row) * h.D + x] = wo[row * h.D + x];
        }
      }
      const fo = m.finalO.get(bh), fl = m.finalLSE.get(bh);
      assert.strictEqual(fo.length, h.Nq * h.D);
      assert.strictEqual(fl.length, h.Nq);
      o.forEach((bits, e) => assert.ok(bits === null ? Number.isNaN(fo[e]) : sameFloat32(fo[e], bits), `${name}: O[${e}] of batch-head ${bh}: ${fo[e]}`));
      lse.forEach((bits, e) => assert.ok(bits === null ? Number.isNaN(fl[e]) : sameFloat32(fl[e], bits), `${name}: LSE[${e}] of batch-head ${bh}: ${fl[e]}`));
      checked++;
    }
  }
  assert.ok(checked >= 4, `${checked} batch-heads' output checked`);
});

test('an array\'s colour scale is its largest finite |value| over a batch-head\'s steps', (t) => {
  const rng = random(t);
  let checked = 0;
  for (const { name, m, want } of traces) {
    const names = [...new Set(want.records.flatMap((w) => w.arrays.map((a) => a.name)))];
    const kinds = [null, ...new Set(want.records.map((w) => w.kind))];
    const bhs = [...new Set(want.records.map((w) => w.bh))];
    for (let n = 0; n < 40 && names.length; n++) {
      const bh = rng.pick(bhs), array = rng.pick(names);
      const input = array === 'q' || array === 'k' || array === 'v';
      const kind = input ? null : rng.pick(kinds);
      let max = 0;
      for (const w of want.records) {
        if (w.bh !== bh || (input ? w.kind !== 'inputs' : w.kind === 'inputs') || (kind && w.kind !== kind)) continue;
        const a = w.arrays.find((x) => x.name === array);
        if (!a) continue;
        for (const b of a.bits) {
          const v = Math.abs(fromBits(b));
          if (Number.isFinite(v) && v > max) max = v;
        }
      }
      // The last inputs record of a batch-head is the one kept.
      const got = m.maxAbs(bh, array, kind);
      if (input && want.records.filter((w) => w.bh === bh && w.kind === 'inputs').length > 1) continue;
      assert.strictEqual(got, max || 1, `${name}: maxAbs(${bh}, ${array}, ${kind})`);
      assert.strictEqual(m.maxAbs(bh, array, kind), got, `${name}: maxAbs(${bh}, ${array}, ${kind}) a second time`);
      checked++;
    }
  }
  assert.ok(checked > 100);
});

const materialised = (h) => Boolean(rungs.find((r) => r.name === h.variant)?.materialised);

const splitKind = (r) => r.kind === 'split_end' || r.kind === 'merge';

// splitWalked is the kv-tiles the block of cur (a split's end or merge)
// walked in cur's split, among steps: its flash steps with as many of its
// split ends before them as cur's split.
function splitWalked(steps, cur) {
  const out = new Set();
  let ended = 0;
  for (const r of steps) {
    if (r.bh !== cur.bh || r.i !== cur.i) continue;
    if (r.kind === 'split_end') ended++;
    if (r.kind === 'flash_step' && ended === cur.j) out.add(r.j);
  }
  return out;
}

// expectedStates is each score tile's state at step k, worked out tile by
// tile from the last step at or before k that touched it (the model
// overlays the steps in order instead).
function expectedStates(m, k) {
  const h = m.h, cur = m.steps[k], out = [];
  const upTo = m.steps.slice(0, k + 1).filter((r) => r.bh === cur.bh);
  const backward = isBackward(h);
  for (let i = 0; i < h.Tr; i++) {
    for (let j = 0; j < h.Tc; j++) {
      let last = null;
      for (let s = upTo.length - 1; s >= 0 && !last; s--) {
        const r = upTo[s];
        const tile = r.i === i && r.j === j && !splitKind(r); // a split's j is no kv-tile
        const row = r.i === i && (r.kind === 'softmax' || r.kind === 'bwd_ds');
        if ((tile && r.j >= 0) || row) last = r;
      }
      let st = 'pending';
      if (last) {
        st = { flash_step: 'done', timing: 'done', bwd_step: 'done', pv: 'consumed', bwd_kv: 'consumed', bwd_dp: 'stored', softmax: 'normalised', bwd_ds: 'normalised',
          scores: materialised(h) ? 'stored' : 'scanned' }[last.kind];
      } else if (!backward && !materialised(h) && upTo.some((r) => r.i === i && (r.kind === 'epilogue' || (r.kind === 'timing' && r.j < 0)))) {
        st = 'skipped'; // its q-tile finished without it
      }
      if (backward && upTo.some((r) => (r.kind === 'bwd_step' || (r.kind === 'timing' && r.j >= 0)) && r.j === j) && i < firstQTile(h, j)) st = 'skipped';
      if (i < h.tracedQ[0] || i >= h.tracedQ[1]) st = 'untraced';
      if (splitKind(cur)) {
        // A split's end or merge: j is a split, and the tiles its block
        // walked in that split are the current ones.
        if (i === cur.i && splitWalked(upTo, cur).has(j)) st = 'current-split';
      } else if (cur.j >= 0 && i === cur.i && j === cur.j) st = 'current';
      else if (cur.j < 0 && i === cur.i && st !== 'skipped') st = 'current-row';
      out.push(st);
    }
  }
  return out;
}

test('every score tile\'s state at every step is what the steps so far did to it', () => {
  let checked = 0;
  for (const { name, m } of traces) {
    if (name === 'kinds') continue; // its records follow no kernel's order
    for (let k = 0; k < m.length; k++) {
      assert.deepEqual(m.tileStates(k), expectedStates(m, k), `${name}: tile states at step ${k}`);
      checked++;
    }
  }
  assert.ok(checked > 120, `${checked} steps`);
});

test('under a causal mask, the tiles above the diagonal are the ones skipped', () => {
  // tail-flash2: 30 queries, the last of 42 positions; the diagonal is
  // shifted by 12.
  for (const name of ['mirror-flash2', 'mirror-flash2_bwd', 'tail-flash2']) {
    const { m, h } = named(name);
    assert.ok(h.causal);
    let seen = 0;
    for (let k = 0; k < m.length; k++) {
      const states = m.tileStates(k), cur = m.steps[k];
      for (let i = 0; i < h.Tr; i++) {
        for (let j = 0; j < h.Tc; j++) {
          // Every key of kv-tile j is after every query of q-tile i, the
          // last of which is at position N − Nq + its row.
          const masked = j * h.Bc > h.N - h.Nq + Math.min(h.Nq, (i + 1) * h.Br) - 1;
          const settled = isBackward(h)
            ? m.steps.slice(0, k + 1).some((r) => r.bh === cur.bh && r.kind === 'bwd_step' && r.j === j) // kv-tile j's block has begun
            : m.epilogueAt.get(`${cur.bh},${i}`) <= k; // q-tile i has finished
          if (!settled) continue;
          assert.strictEqual(states[i * h.Tc + j] === 'skipped', masked, `${name} step ${k}: tile (${i}, ${j}) is ${states[i * h.Tc + j]}`);
          seen++;
        }
      }
    }
    assert.ok(seen > 50);
  }
});

test('a backward trace keeps its rows\' dO, O, L and D, and dQ as its q-tiles finish', () => {
  for (const name of ['mirror-flash2_bwd', 'mirror-naive_bwd']) {
    const { m, h, records } = named(name);
    assert.ok(isBackward(h) && m.backward);
    assert.strictEqual(m.backward.naive, materialised(h));
    for (const [bh, rows] of m.backward.rows) {
      const pre = records.filter((r) => r.bh === bh && r.kind === 'bwd_pre');
      const ds = records.filter((r) => r.bh === bh && r.kind === 'bwd_ds');
      const check = (arr, width, from, field) => {
        if (!arr) return assert.strictEqual(from.length, 0, `${name}: ${field} has records and no array`);
        const want = new Array(arr.length).fill(NaN);
        for (const r of from) {
          for (let x = 0; x < r.rowsValid * width; x++) want[r.i * h.Br * width + x] = r[field][x];
        }
        want.forEach((v, e) => assert.ok(Object.is(arr[e], v) || (Number.isNaN(v) && Number.isNaN(arr[e])), `${name}: ${field}[${e}] of batch-head ${bh}`));
      };
      check(rows.dO, h.D, pre, 'do');
      check(rows.o, h.D, pre, 'o');
      check(rows.l, 1, pre, 'lse');
      check(rows.d, 1, pre.length ? pre : ds, 'delta');
      const dqs = records.filter((r) => r.bh === bh && r.kind === 'bwd_dq');
      check(m.backward.dq.get(bh), h.D, dqs, 'dq');
      for (const r of dqs) assert.strictEqual(m.steps[m.backward.dqAt.get(`${bh},${r.i}`)], r);
      for (let i = 0; i < h.Tr; i++) {
        const mine = m.steps.map((r, k) => (r.bh === bh && r.i === i && r.kind === 'bwd_step' ? k : -1)).filter((k) => k >= 0);
        assert.deepEqual(m.backward.stepsOfQ.get(`${bh},${i}`) ?? [], mine, `${name}: the steps of q-tile ${i}`);
      }
    }
  }
});

test('a finished backward\'s gradients are dQ as written, and each kv-tile\'s last dK (× 1/√d) and dV', () => {
  for (const name of ['mirror-flash2_bwd', 'mirror-naive_bwd']) {
    const { m, h, records } = named(name);
    for (let bh = h.tracedBH[0]; bh < h.tracedBH[1]; bh++) {
      const g = gradients(m, bh);
      assert.ok(g, `${name}: no gradients for batch-head ${bh}`);
      assert.strictEqual(g.dq, m.backward.dq.get(bh));
      for (let j = 0; j < h.Tc; j++) {
        const last = records.filter((r) => r.bh === bh && (r.kind === 'bwd_step' || r.kind === 'bwd_kv') && r.j === j && r.i === h.Tr - 1).at(-1);
        assert.ok(last, `${name}: kv-tile ${j} has no last step`);
        for (let e = 0; e < last.colsValid * h.D; e++) {
          const at = j * h.Bc * h.D + e;
          assert.ok(Object.is(g.dk[at], Math.fround(last.dk[e] * h.scale)), `${name}: dK[${at}] ${g.dk[at]}`);
          assert.ok(Object.is(g.dv[at], last.dv[e]), `${name}: dV[${at}] ${g.dv[at]}`);
        }
      }
      assert.ok(!g.dk.some(Number.isNaN) && !g.dv.some(Number.isNaN) && !g.dq.some(Number.isNaN));
    }
    // Before the trace is whole there are none.
    const part = new TraceModel(m.h);
    for (const r of records.slice(0, -1)) part.add(r);
    assert.strictEqual(gradients(part, h.tracedBH[0]), null, `${name}: gradients before the last record`);
  }
});
