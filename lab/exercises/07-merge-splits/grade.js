// Exercise 7's grader: mergeSplits is called once for every row of every
// q-tile of the decode_split trace, with that row's split ends (LSE_s and
// O_s, in split order), and its answer held to the kernel's epilogue.
import { firstMiss, random, within } from '/static/js/lab_grade.js';

// kernelCalls are the calls the kernel's trace gives: one per row of each
// (batch-head, q-tile) whose epilogue it holds, in trace order.
export function kernelCalls(h, model) {
  const calls = [];
  const ends = new Map(); // "bh,i" -> split_end records, in split order
  const d = h.D;
  model.steps.forEach((r, step) => {
    const key = `${r.bh},${r.i}`;
    if (r.kind === 'split_end') {
      if (!ends.has(key)) ends.set(key, []);
      ends.get(key)[r.j] = r;
      return;
    }
    if (r.kind !== 'epilogue' || !ends.has(key)) return;
    const parts = ends.get(key);
    for (let row = 0; row < r.rowsValid; row++) {
      calls.push({
        args: [parts.map((p) => p.lse[row]), parts.map((p) => Array.from(p.o.subarray(row * d, (row + 1) * d)))],
        expect: { lse: r.lse[row], o: Array.from(r.o.subarray(row * d, (row + 1) * d)) },
        at: { step, bh: r.bh, i: r.i, rowStart: r.i * h.Br + row },
      });
    }
  });
  return calls;
}

// merge is the float64 reference: the LSEs against their max, so that no
// exponent is positive.
export function merge(lses, os) {
  const d = os[0].length;
  const o = new Array(d).fill(0);
  const M = Math.max(...lses);
  if (M === -Infinity) return { lse: -Infinity, o };
  const lse = M + Math.log(lses.reduce((acc, v) => acc + Math.exp(v - M), 0));
  lses.forEach((v, s) => {
    const w = Math.exp(v - lse);
    for (let x = 0; x < d; x++) o[x] += w * os[s][x];
  });
  return { lse, o };
}

// randomCalls are the hidden cases: 1 to 6 splits, a head dim up to 16,
// some splits empty (LSE_s = −∞, O_s zeros, never all of them), and LSEs
// shifted far from 0. The first two cases are always shifted by +800 and
// −800, where exp(LSE_s) is Infinity or 0 even in float64 (float32's
// exp already overflows past 88.7): a merge that does not subtract the max
// fails there.
export function randomCalls(seed, count = 40) {
  const g = random(seed);
  const calls = [];
  for (let n = 0; n < count; n++) {
    const splits = g.int(n < 2 ? 2 : 1, 6), d = g.int(1, 16);
    const shift = n === 0 ? 800 : n === 1 ? -800 : [0, 0, 0, 90, -90, 400][g.int(0, 5)];
    const sd = g.next() < 0.3 ? 8 : 1;
    const keep = g.int(0, splits - 1); // one split that always sees keys
    const lses = [], os = [];
    for (let s = 0; s < splits; s++) {
      const empty = s !== keep && g.next() < 0.25;
      lses.push(empty ? -Infinity : shift + sd * g.normal());
      os.push(Array.from({ length: d }, () => (empty ? 0 : g.normal())));
    }
    calls.push({ args: [lses, os], expect: merge(lses, os), at: { splits, d, shift } });
  }
  return calls;
}

// check holds one row's answer to the expected LSE and O.
export function check(call, value) {
  const { lse, o } = call.expect;
  const d = o.length;
  if (value === null || typeof value !== 'object') return { message: `mergeSplits returned ${value === undefined ? 'nothing' : typeof value}; return { lse, o }` };
  if (typeof value.lse !== 'number') return { message: `your lse is ${value.lse === undefined ? 'missing' : `not a number (${typeof value.lse})`}` };
  if (!Array.isArray(value.o)) return { message: `your o is ${value.o === undefined ? 'missing' : `not an array (${typeof value.o})`}` };
  if (value.o.length !== d) return { message: `your o has ${value.o.length} numbers; the row has ${d}` };
  // A kernel call's miss is at its row's end (the epilogue); a hidden
  // case's has no place in the run.
  const at = call.at.i === undefined ? {} : { row: 0, final: true, step: call.at.step };
  if (!within(value.lse, lse, Math.abs(lse) || 1)) return { ...at, quantity: 'LSE', yours: value.lse, kernelValue: lse };
  const x = firstMiss(value.o, o);
  if (x >= 0) return { ...at, quantity: 'O', x, yours: value.o[x], kernelValue: o[x] };
  return null;
}
