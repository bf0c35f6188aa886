// Exercise 1's grader: onlineSoftmaxStep is called once for every flash
// step of the kernel's trace, with the kernel's own state before the step,
// and its answer held to the kernel's state after it.
import { firstMiss, nested, onlineStep, random, shapeError, within, zeros, scaleOf } from '/static/js/lab_grade.js';

// kernelCalls are the calls the kernel's trace gives: one per flash step,
// in trace order.
export function kernelCalls(h, model) {
  const calls = [];
  const before = new Map(); // "bh,i" -> the state after its last step
  model.steps.forEach((r, step) => {
    if (r.kind !== 'flash_step') return;
    const key = `${r.bh},${r.i}`;
    const rows = r.rowsValid, cols = r.colsValid, d = h.D;
    const prev = before.get(key);
    const v = model.inputs.get(r.bh).v;
    calls.push({
      args: [Array.from(r.m_old.subarray(0, rows)), prev ? prev.l : zeros(rows), prev ? prev.o : nested(new Float32Array(rows * d), rows, d),
        nested(r.s, rows, cols, h.Bc), nested(v, cols, d, d, r.j * h.Bc * d)],
      expect: { m: Array.from(r.m_new.subarray(0, rows)), l: Array.from(r.l.subarray(0, rows)), O: nested(r.o, rows, d) },
      at: { step, bh: r.bh, i: r.i, j: r.j, rowStart: r.i * h.Br },
    });
    before.set(key, { l: Array.from(r.l.subarray(0, rows)), o: nested(r.o, rows, d) });
  });
  return calls;
}

// randomCalls are the hidden cases: random tiles (1 to 8 rows and keys, a
// head dim up to 16), a state before them from earlier random tiles, some
// scores masked, some logits large; each held to the float64 reference.
export function randomCalls(seed, count = 40) {
  const g = random(seed);
  const calls = [];
  for (let n = 0; n < count; n++) {
    const rows = g.int(1, 8), cols = g.int(1, 8), d = g.int(1, 16), sd = g.next() < 0.3 ? 30 : 2;
    let state = { m: new Array(rows).fill(-Infinity), l: zeros(rows), O: Array.from({ length: rows }, () => zeros(d)) };
    const earlier = g.int(0, 3);
    const tile = (first) => {
      const S = g.matrix(rows, cols, sd);
      // A diagonal mask, as a causal run's tile has: never a whole row of
      // a first tile (the kernel's first tile holds key 0 for every row).
      const shift = g.int(-cols, cols);
      S.forEach((row, r) => row.forEach((_, c) => { if (c > r + shift && !(first && c === 0)) row[c] = -Infinity; }));
      return { S, V: g.matrix(cols, d) };
    };
    for (let k = 0; k < earlier; k++) {
      const t = tile(k === 0);
      state = onlineStep(state.m, state.l, state.O, t.S, t.V);
    }
    const t = tile(earlier === 0);
    calls.push({
      args: [state.m, state.l, state.O, t.S, t.V],
      expect: onlineStep(state.m, state.l, state.O, t.S, t.V),
      at: { rows, cols, d, tile: earlier },
    });
  }
  return calls;
}

// check holds one answer to its call's expected state: the first row whose
// m, l or O misses, or null.
export function check(call, value) {
  const { m, l, O } = call.expect;
  const rows = m.length, d = O[0].length;
  if (value === null || typeof value !== 'object') return { message: `onlineSoftmaxStep returned ${value === undefined ? 'nothing' : typeof value}; return { m, l, O }` };
  for (const [name, cols] of [['m'], ['l'], ['O', d]]) {
    const bad = shapeError(name, value[name], rows, cols);
    if (bad) return { message: bad };
  }
  const lScale = scaleOf(l);
  for (let r = 0; r < rows; r++) {
    const at = { j: call.at.j, step: call.at.step, row: r, state: value, kernel: call.expect };
    if (!within(value.m[r], m[r], Math.abs(m[r]) || 1)) return { ...at, quantity: 'm', yours: value.m[r], kernelValue: m[r] };
    if (!within(value.l[r], l[r], lScale)) return { ...at, quantity: 'l', yours: value.l[r], kernelValue: l[r] };
    const x = firstMiss(value.O[r], O[r]);
    if (x >= 0) return { ...at, quantity: 'O', x, yours: value.O[r][x], kernelValue: O[r][x] };
  }
  return null;
}
