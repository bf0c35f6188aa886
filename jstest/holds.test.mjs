// The numbers a lesson's checkpoint holds back that name their checkpoint
// (static/js/holds.js, lessons.Hold with Of and By): the hold read from
// the frame's URL, what each kind keeps back at which step, the merge
// view's state with the merge taken out, and the release. The merge hold
// (merge.bh.row.step.id) is held on the CPU mirror's decode_split traces:
// before the q-tile's first merge everything shows, from it on the row's
// weights, LSE, merged O and epilogue O are "?", each split's LSEₛ and Oₛ
// stay; released, everything shows again.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { mergeState } from '../static/js/splits.js';
import {
  anyHeld, clearHolds, holdCount, isHeld, letGo, mergeHeldRows, mergeHolds, parseHolds, withholdMerge,
} from '../static/js/holds.js';
import { bytesOf, useRungs } from './helpers.mjs';

useRungs();

function load(file) {
  let m = null;
  const reader = new TraceReader({ onHeader: (h) => { m = new TraceModel(h); }, onRecord: (r) => m.add(r) });
  reader.push(bytesOf(`traces/${file}.fstrace`));
  assert.ok(reader.complete, file);
  return m;
}

// firstMerge is the step (from 1) of block (bh, i)'s first merge record:
// the STEP the server writes into a merge hold.
const firstMerge = (m, bh, i) => m.steps.findIndex((r) => r.kind === 'merge' && r.bh === bh && r.i === i && r.j === 0) + 1;

// numbersIn is every number a value holds, typed arrays and nested
// objects included.
function numbersIn(v, out = []) {
  if (typeof v === 'number') out.push(v);
  else if (ArrayBuffer.isView(v)) out.push(...v);
  else if (Array.isArray(v)) v.forEach((x) => numbersIn(x, out));
  else if (v && typeof v === 'object') Object.values(v).forEach((x) => numbersIn(x, out));
  return out;
}

// mergeNumbers are the numbers of row x of block (bh, i) that give its
// merge away: each merge record's w, LSE and O row, the epilogue's O row
// and LSE. Whole numbers (a count, a key) are left out: the answers are
// not.
function mergeNumbers(m, bh, i, x) {
  const D = m.h.D, out = [];
  for (const r of m.steps) {
    if (r.bh !== bh || r.i !== i || (r.kind !== 'merge' && r.kind !== 'epilogue')) continue;
    out.push(r.lse[x], ...r.o.subarray(x * D, (x + 1) * D));
    if (r.kind === 'merge') out.push(r.w[x]);
  }
  return out.filter((v) => Number.isFinite(v) && !Number.isInteger(v));
}

test('parseHolds reads the holds that name their checkpoint, and leaves the others to the stepper', () => {
  const holds = parseHolds('merge.0.0.17.merge-o,psum.1.5.3.bwd-p-left,dq.0.2.9.bwd-dq,2.1.4,roles.0.1.6,merge.0.x.3.a,merge.1.2,bogus.0.0.1.z,merge.3.47.40.a.b');
  assert.deepEqual([...holds.merge], [['0.0', [{ step: 17, by: 'merge-o' }]], ['3.47', [{ step: 40, by: 'a.b' }]]]);
  assert.deepEqual([...holds.psum], [['1.5', [{ step: 3, by: 'bwd-p-left' }]]]);
  assert.deepEqual([...holds.dq], [['0.2', [{ step: 9, by: 'bwd-dq' }]]]);
  assert.strictEqual(holdCount(holds), 4);
  for (const empty of [null, '', '0.0.3', 'roles.0.0.3']) assert.strictEqual(holdCount(parseHolds(empty)), 0, String(empty));
  // Two checkpoints may hold one row: both are kept.
  const two = parseHolds('merge.0.0.17.merge-o,merge.0.0.19.other');
  assert.deepEqual(two.merge.get('0.0'), [{ step: 17, by: 'merge-o' }, { step: 19, by: 'other' }]);
});

test('a merge and a dq hold start at their step, a psum hold after it; on their row and batch-head alone', () => {
  const holds = parseHolds('merge.0.47.40.merge-o,dq.1.3.5.bwd-dq,psum.1.3.5.bwd-p-left');
  // k counts from 0: step STEP is k = STEP − 1.
  assert.strictEqual(isHeld(holds, 'merge', 0, 47, 38), false, 'merge at STEP − 1');
  assert.strictEqual(isHeld(holds, 'merge', 0, 47, 39), true, 'merge at STEP');
  assert.strictEqual(isHeld(holds, 'merge', 0, 47, 60), true, 'merge after STEP');
  assert.strictEqual(isHeld(holds, 'merge', 0, 46, 39), false, 'another row');
  assert.strictEqual(isHeld(holds, 'merge', 1, 47, 39), false, 'another batch-head');
  assert.strictEqual(isHeld(holds, 'dq', 1, 3, 3), false);
  assert.strictEqual(isHeld(holds, 'dq', 1, 3, 4), true);
  assert.strictEqual(isHeld(holds, 'psum', 1, 3, 4), false, 'psum at its step shows: the question reads it');
  assert.strictEqual(isHeld(holds, 'psum', 1, 3, 5), true);
  assert.strictEqual(isHeld(holds, 'merge', 1, 3, 10), false, 'a dq or psum hold is no merge hold');
  assert.strictEqual(anyHeld(holds, 'merge', 0, 38), false);
  assert.strictEqual(anyHeld(holds, 'merge', 0, 39), true);
  assert.strictEqual(anyHeld(holds, 'merge', 1, 39), false);
});

test('what a merge hold keeps back of a step: the O row, LSE and w on a merge, the O row and LSE on the epilogue', () => {
  const holds = parseHolds('merge.2.5.30.merge-o');
  const at = (kind, k, i = 1, bh = 2) => ({ kind, bh, i, rowsValid: 4 });
  assert.deepEqual([...mergeHolds(holds, at('merge', 29), 5, 29)].sort(), ['lse', 'o', 'w']);
  assert.deepEqual([...mergeHolds(holds, at('epilogue', 31), 5, 31)].sort(), ['lse', 'o']);
  assert.strictEqual(mergeHolds(holds, at('merge', 28), 5, 28), null, 'before the hold\'s step');
  assert.strictEqual(mergeHolds(holds, at('merge', 29), 4, 29), null, 'another row');
  assert.strictEqual(mergeHolds(holds, at('merge', 29, 1, 3), 5, 29), null, 'another batch-head');
  // A split's end and a flash step show theirs (Oₛ, LSEₛ: the question's inputs).
  for (const kind of ['split_end', 'flash_step']) assert.strictEqual(mergeHolds(holds, at(kind, 40), 5, 40), null, kind);
  // Each split's LSEₛ (the rows table's lse-s) is never held.
  assert.ok(!mergeHolds(holds, at('merge', 29), 5, 29).has('lse-s'));
  // The O tile's rows: ROW is of the run's rows, not of the q-tile: row 5
  // is q-tile 1's second row at Br = 4.
  assert.deepEqual(mergeHeldRows(holds, at('merge', 29), 4, 29), [false, true, false, false]);
  assert.deepEqual(mergeHeldRows(holds, at('merge', 29, 0), 4, 29), [false, false, false, false]);
  assert.deepEqual(mergeHeldRows(holds, at('merge', 28), 4, 28), [false, false, false, false]);
  assert.deepEqual(mergeHeldRows(holds, { ...at('epilogue', 31), rowsValid: 2 }, 4, 31), [false, true]);
});

for (const [file, bh, row] of [['mirror-decode_split', 0, 0], ['mirror-decode_split-causal', 0, 47]]) {
  test(`${file}: merge.${bh}.${row}.STEP keeps the merge of row ${row} back from its first merge step until released`, () => {
    const m = load(file);
    const h = m.h, i = Math.floor(row / h.Br), x = row % h.Br;
    const STEP = firstMerge(m, bh, i);
    assert.ok(STEP > 1, 'the block has a merge');
    assert.strictEqual(m.steps[STEP - 1].kind, 'merge');
    const holds = parseHolds(`merge.${bh}.${row}.${STEP}.merge-o`);
    const secret = mergeNumbers(m, bh, i, x);
    assert.ok(secret.length > 4 * h.D, 'the merge has numbers to hold');
    // The state the merge view draws at step k (0-based), for row x of
    // step k's q-tile, held as the view holds it.
    const view = (k) => {
      const st = mergeState(m, k, x);
      return st && isHeld(holds, 'merge', st.bh, st.row, k) ? withholdMerge(st) : st;
    };
    // Steps of the block: every split end before STEP; its merges and its
    // epilogue from it on.
    const mine = m.steps.map((r, k) => ({ r, k })).filter(({ r }) => r.bh === bh && r.i === i);
    const ends = mine.filter(({ r }) => r.kind === 'split_end');
    const merges = mine.filter(({ r }) => r.kind === 'merge' || r.kind === 'epilogue');
    assert.ok(ends.every(({ k }) => k + 1 < STEP) && merges.every(({ k }) => k + 1 >= STEP));

    // Before STEP: nothing of the row is held; the last split end shows
    // every split's LSEₛ and Oₛ, and the LSE check.
    for (const { r, k } of ends) {
      assert.strictEqual(mergeHolds(holds, r, row, k), null, `split end at step ${k + 1}`);
      assert.strictEqual(view(k).held, undefined);
    }
    const lastEnd = view(ends.at(-1).k);
    assert.ok(lastEnd.splits.every((p) => p.ended && p.lse !== null && p.o !== null));
    assert.notStrictEqual(lastEnd.lseCheck, null);
    // STEP − 1 (another block's step, or this one's last end): not held.
    assert.strictEqual(isHeld(holds, 'merge', bh, row, STEP - 2), false);
    assert.deepEqual(mergeHeldRows(holds, m.steps[STEP - 2], h.Br, STEP - 2).filter(Boolean), []);

    // From STEP on: the merge view's state holds none of the merge's
    // numbers, and keeps each split's LSEₛ and Oₛ.
    for (const { r, k } of merges) {
      const whole = mergeState(m, k, x), st = view(k);
      assert.ok(st.held, `step ${k + 1} is held`);
      assert.strictEqual(st.held.merged, true);
      assert.strictEqual(st.held.final, r.kind === 'epilogue');
      for (const f of ['lse', 'lseCheck', 'wSum', 'merged', 'final', 'finalLSE', 'finalDiff']) assert.strictEqual(st[f], null, `step ${k + 1}: ${f}`);
      assert.ok(st.splits.every((p) => p.w === null && p.wCheck === null));
      const shown = new Set(numbersIn(st));
      const leaked = secret.filter((v) => shown.has(v));
      assert.deepEqual(leaked, [], `step ${k + 1} (${r.kind}) shows the merge's numbers`);
      // What the question gives stays: each split's LSEₛ and Oₛ, as the trace has them.
      st.splits.forEach((p, s) => {
        assert.strictEqual(p.lse, whole.splits[s].lse);
        assert.deepEqual(p.o, whole.splits[s].o);
        assert.ok(p.o.length === h.D && p.lse !== null, `split ${s}'s LSEₛ and Oₛ`);
      });
      assert.strictEqual(st.mergedThrough, whole.mergedThrough);
      // The rows table and the O tile.
      assert.deepEqual([...mergeHolds(holds, r, row, k)].sort(), r.kind === 'merge' ? ['lse', 'o', 'w'] : ['lse', 'o']);
      assert.deepEqual(mergeHeldRows(holds, r, h.Br, k), Array.from({ length: r.rowsValid }, (_, y) => y === x));
      // Unheld, the same step shows the merge: the test's secret is there to find.
      assert.ok(numbersIn(whole).some((v) => secret.includes(v)), `step ${k + 1} unheld shows the merge`);
    }
    // After the block's epilogue (the next blocks' steps): the final O
    // panel still holds the row, and no other.
    const after = merges.at(-1).k + 1;
    if (after < m.steps.length) {
      assert.strictEqual(isHeld(holds, 'merge', bh, row, after), true);
      for (let y = 0; y < h.Nq; y++) if (y !== row) assert.strictEqual(isHeld(holds, 'merge', bh, y, after), false, `row ${y}`);
    }
    // Another row's merge, and another batch-head's, show.
    for (let k = 0; k < m.steps.length; k++) {
      const r = m.steps[k];
      if (r.bh === bh && r.i === i) continue;
      for (let y = 0; y < r.rowsValid; y++) {
        const st = mergeState(m, k, y);
        if (st) assert.strictEqual(isHeld(holds, 'merge', st.bh, st.row, k), false, `step ${k + 1}, row ${st.row}`);
      }
    }

    // Released by another checkpoint's answer: still held.
    assert.strictEqual(letGo(holds, new Set(['other'])), false);
    assert.strictEqual(isHeld(holds, 'merge', bh, row, STEP - 1), true);
    // Released by its own: everything shows again.
    assert.strictEqual(letGo(holds, new Set(['other', 'merge-o'])), true);
    assert.strictEqual(holdCount(holds), 0);
    for (const { r, k } of merges) {
      assert.strictEqual(mergeHolds(holds, r, row, k), null);
      assert.strictEqual(view(k).held, undefined);
      assert.deepEqual(view(k), mergeState(m, k, x));
    }
    assert.strictEqual(letGo(holds, new Set(['merge-o'])), false, 'nothing left to let go');
  });
}

test('letGo drops only the answered checkpoints\' holds; clearHolds (flashstep-release) drops all', () => {
  const holds = parseHolds('merge.0.0.17.merge-o,merge.0.0.17.later,psum.0.1.2.bwd-p-left,dq.0.1.4.bwd-dq,dq.0.3.4');
  assert.strictEqual(letGo(holds, new Set(['merge-o'])), true);
  assert.strictEqual(isHeld(holds, 'merge', 0, 0, 16), true, 'the other checkpoint still holds the row');
  assert.strictEqual(letGo(holds, new Set(['later', 'bwd-dq'])), true);
  assert.strictEqual(isHeld(holds, 'merge', 0, 0, 16), false);
  assert.strictEqual(isHeld(holds, 'dq', 0, 1, 3), false);
  assert.strictEqual(isHeld(holds, 'psum', 0, 1, 2), true);
  // A hold that names no checkpoint waits for the release.
  assert.strictEqual(letGo(holds, new Set([''])), false);
  assert.strictEqual(isHeld(holds, 'dq', 0, 3, 3), true);
  clearHolds(holds);
  assert.strictEqual(holdCount(holds), 0);
  assert.strictEqual(isHeld(holds, 'psum', 0, 1, 2), false);
  assert.strictEqual(isHeld(holds, 'dq', 0, 3, 3), false);
});
