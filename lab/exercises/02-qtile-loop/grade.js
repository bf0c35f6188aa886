// Exercise 2's grader: attendQTile runs once for every q-tile of the
// kernel's trace; each record(j, …) it makes is held to the kernel's flash
// step of that q-tile, in order, and its result to the kernel's epilogue.
import { attention, firstMiss, nested, random, scaleOf, shapeError, within } from '/static/js/lab_grade.js';

export function kernelCalls(h, model) {
  const calls = [];
  const byTile = new Map(); // "bh,i" -> { steps: [...], epilogue }
  model.steps.forEach((r, step) => {
    if (r.kind !== 'flash_step' && r.kind !== 'epilogue') return;
    const key = `${r.bh},${r.i}`;
    if (!byTile.has(key)) byTile.set(key, { bh: r.bh, i: r.i, rows: r.rowsValid, steps: [] });
    const t = byTile.get(key);
    const d = h.D;
    const state = { step, j: r.j, O: nested(r.o, r.rowsValid, d) };
    if (r.kind === 'flash_step') t.steps.push({ ...state, m: Array.from(r.m_new.subarray(0, r.rowsValid)), l: Array.from(r.l.subarray(0, r.rowsValid)) });
    else t.epilogue = { ...state, lse: Array.from(r.lse.subarray(0, r.rowsValid)) };
  });
  for (const t of byTile.values()) {
    if (!t.epilogue) continue;
    const inp = model.inputs.get(t.bh);
    const d = h.D;
    calls.push({
      args: [nested(inp.q, t.rows, d, d, t.i * h.Br * d), nested(inp.k, h.N, d), nested(inp.v, h.N, d),
        { Bc: h.Bc, scale: h.scale, causal: h.causal, qStart: t.i * h.Br }],
      record: true,
      expect: t,
      at: { bh: t.bh, i: t.i, rowStart: t.i * h.Br },
    });
  }
  return calls;
}

// randomCalls are the hidden cases: a random sequence (N up to 70, ragged),
// a q-tile anywhere in it, random tile sizes, causal or not; the tiles a
// block must visit and its output are held to the float64 reference.
export function randomCalls(seed, count = 24) {
  const g = random(seed);
  const calls = [];
  for (let n = 0; n < count; n++) {
    const N = g.int(2, 70), d = g.int(1, 16), rows = g.int(1, Math.min(16, N)), Bc = g.int(1, 16);
    const causal = g.next() < 0.6, sd = g.next() < 0.3 ? 4 : 1;
    const qStart = rows * g.int(0, Math.floor((N - 1) / rows));
    const q = Math.min(rows, N - qStart);
    const Q = g.matrix(q, d, sd), K = g.matrix(N, d, sd), V = g.matrix(N, d);
    const scale = Math.fround(1 / Math.sqrt(d));
    const tiles = Math.ceil(N / Bc);
    const visits = causal ? Math.min(tiles, Math.floor((qStart + q - 1) / Bc) + 1) : tiles;
    const ref = attention(Q, K, V, scale, causal, qStart);
    calls.push({
      args: [Q, K, V, { Bc, scale, causal, qStart }],
      record: true,
      expect: { random: true, visits, O: ref.map((x) => x.o), lse: ref.map((x) => x.lse), rows: q },
      at: { N, d, rows: q, Bc, causal, qStart },
    });
  }
  return calls;
}

// check holds one q-tile's records and result to the kernel's (or, for a
// hidden case, to the tiles it must visit and the reference output).
export function check(call, value, records) {
  const e = call.expect;
  const want = e.random ? Array.from({ length: e.visits }, (_, j) => ({ j })) : e.steps;
  for (let k = 0; k < Math.max(want.length, records.length); k++) {
    const got = records[k], w = want[k];
    if (!got) return { message: `you recorded ${records.length} kv-tiles; the block must visit ${want.length}: kv-tile ${w.j} is missing`, j: w.j };
    if (!w) return { message: `you recorded kv-tile ${got[0]} after the last one the block must visit (kv-tile ${want[want.length - 1].j}): under the causal mask it is masked for every row of the q-tile, and skipped`, j: got[0] };
    if (got[0] !== w.j) return { message: `your record ${k + 1} is kv-tile ${got[0]}; the block's is kv-tile ${w.j}`, j: w.j };
    if (e.random) continue;
    const [, m, l, O] = got;
    const rows = w.m.length, d = w.O[0].length;
    for (const [name, a, cols] of [['m', m], ['l', l], ['O', O, d]]) {
      const bad = shapeError(name, a, rows, cols);
      if (bad) return { message: `${bad} (record of kv-tile ${w.j})`, j: w.j };
    }
    const lScale = scaleOf(w.l);
    for (let r = 0; r < rows; r++) {
      const at = { j: w.j, step: w.step, row: r, state: { m, l, O }, kernel: w };
      if (!within(m[r], w.m[r], Math.abs(w.m[r]) || 1)) return { ...at, quantity: 'm', yours: m[r], kernelValue: w.m[r] };
      if (!within(l[r], w.l[r], lScale)) return { ...at, quantity: 'l', yours: l[r], kernelValue: w.l[r] };
      const x = firstMiss(O[r], w.O[r]);
      if (x >= 0) return { ...at, quantity: 'O', x, yours: O[r][x], kernelValue: w.O[r][x] };
    }
  }
  if (value === null || typeof value !== 'object') return { message: `attendQTile returned ${value === undefined ? 'nothing' : typeof value}; return { O, lse }` };
  const fin = e.random ? e : e.epilogue;
  const rows = fin.O.length, d = fin.O[0].length;
  for (const [name, a, cols] of [['O', value.O, d], ['lse', value.lse]]) {
    const bad = shapeError(name, a, rows, cols);
    if (bad) return { message: `${bad} (the result)` };
  }
  for (let r = 0; r < rows; r++) {
    const at = { j: -1, step: fin.step, row: r, final: true };
    if (!within(value.lse[r], fin.lse[r], Math.abs(fin.lse[r]) || 1)) return { ...at, quantity: 'LSE', yours: value.lse[r], kernelValue: fin.lse[r] };
    const x = firstMiss(value.O[r], fin.O[r]);
    if (x >= 0) return { ...at, quantity: 'O', x, yours: value.O[r][x], kernelValue: fin.O[r][x] };
  }
  return null;
}
