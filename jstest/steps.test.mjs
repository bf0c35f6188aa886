// The steps' words and figures (static/js/steps.js) and the side by
// side's progress axis (compare_axis.js): names of batch-heads and tiles,
// a rung's own words filled in, every step of every fixture trace told at
// every point of the course, and the axis that steps naive and flash
// together.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { batchHead, batchHeadShort, describe, fill, firstQTile, materialises, sub } from '../static/js/steps.js';
import { Knowledge, TAUGHT_IN } from '../static/js/taught.js';
import { cumulative, keysOf, positionsOf, reference, stepAt } from '../static/js/compare_axis.js';
import { bytesOf, fixture, random, useRungs } from './helpers.mjs';

const rungs = useRungs();

function load(file) {
  let m = null;
  const reader = new TraceReader({ onHeader: (h) => { m = new TraceModel(h); }, onRecord: (r) => m.add(r) });
  reader.push(bytesOf(`traces/${file}.fstrace`));
  assert.ok(reader.complete);
  return m;
}
const models = fixture('traces/index.json').traces.filter((e) => e.file === e.summary && e.file !== 'kinds').map((e) => ({ name: e.file, m: load(e.file) }));

const SUBSCRIPTS = '₀₁₂₃₄₅₆₇₈₉';

test('subscripts, batch-heads and the first q-tile a backward block visits', (t) => {
  const rng = random(t);
  for (let n = 0; n < 500; n++) {
    const x = rng.int(10 ** (1 + rng.int(9)));
    const s = sub(x);
    assert.strictEqual([...s].map((c) => SUBSCRIPTS.indexOf(c)).join(''), String(x), `sub(${x}) = ${s}`);
    const heads = 1 + rng.int(32), bh = rng.int(heads * (1 + rng.int(8)));
    // Grouped heads name the K/V head too: heads/kvHeads query heads in a
    // row share one.
    const divisors = Array.from({ length: heads }, (_, x) => x + 1).filter((x) => heads % x === 0);
    const kvHeads = rng.int(2) ? heads : rng.pick(divisors);
    for (const h of [{ heads }, { heads, kvHeads }]) {
      const [, b, hd, kv] = /^batch (\d+), head (\d+)(?:, K\/V head (\d+))?$/.exec(batchHead(h, bh)) ?? [];
      assert.strictEqual(Number(b) * heads + Number(hd), bh, `batchHead of ${bh} with ${heads} heads: ${batchHead(h, bh)}`);
      assert.ok(Number(hd) < heads);
      assert.strictEqual(batchHeadShort(h, bh), `b${b} h${hd}`);
      if (!h.kvHeads || h.kvHeads === heads) assert.strictEqual(kv, undefined, batchHead(h, bh));
      else assert.strictEqual(Number(kv), Math.floor(Number(hd) * kvHeads / heads), `${batchHead(h, bh)} of ${heads} heads over ${kvHeads}`);
    }
    // The first q-tile with a query at or after the kv-tile's first key:
    // query row r is position N − Nq + r.
    const N = 1 + rng.int(4096);
    const g = { causal: rng.int(2) === 1, N, Nq: rng.int(2) ? N : 1 + rng.int(N), Br: 1 + rng.int(128), Bc: 1 + rng.int(128) };
    const j = rng.int(Math.ceil(N / g.Bc));
    let want = 0;
    if (g.causal) while (g.N - g.Nq + (want + 1) * g.Br - 1 < j * g.Bc) want++;
    assert.strictEqual(firstQTile(g, j), want, `firstQTile(${JSON.stringify(g)}, ${j})`);
    assert.ok(want * g.Br < g.Nq, `kv-tile ${j}'s first q-tile ${want} is a q-tile of ${JSON.stringify(g)}`);
  }
});

test('a kernel S and P go through device memory where its rung says so', () => {
  assert.ok(rungs.length >= 10);
  for (const r of rungs) assert.strictEqual(materialises(r.name), Boolean(r.materialised), r.name);
  assert.strictEqual(materialises('no such kernel'), false);
});

test('a rung\'s own words take the step\'s figures', (t) => {
  const rng = random(t);
  for (let n = 0; n < 200; n++) {
    const N = 1 + rng.int(4096);
    const h = { N, Nq: rng.int(2) ? N : 1 + rng.int(N), Br: 1 + rng.int(128), Bc: 1 + rng.int(128), heads: 1 + rng.int(8) };
    const r = { i: rng.int(Math.ceil(h.Nq / h.Br)), j: rng.int(Math.ceil(h.N / h.Bc)), bh: rng.int(16) };
    const text = '{i}|{j}|{head}|{rows}|{keys}|{Q_i}|{K_j}|{V_j}|{O_i}|{dO_i}|{L_i}|{D_i}|{dQ_i}|{dK_j}|{dV_j}|{nothing}';
    const got = fill(text, h, r).split('|');
    // Rows are query rows (of Nq), keys of N.
    const rows = `${r.i * h.Br}–${Math.min(h.Nq, (r.i + 1) * h.Br) - 1}`, keys = `${r.j * h.Bc}–${Math.min(h.N, (r.j + 1) * h.Bc) - 1}`;
    assert.deepEqual(got, [String(r.i), String(r.j), batchHead(h, r.bh), rows, keys, `Q${sub(r.i)}`, `K${sub(r.j)}`, `V${sub(r.j)}`, `O${sub(r.i)}`,
      `dO${sub(r.i)}`, `L${sub(r.i)}`, `D${sub(r.i)}`, `dQ${sub(r.i)}`, `dK${sub(r.j)}`, `dV${sub(r.j)}`, '{nothing}']);
  }
  assert.strictEqual(fill(undefined, { N: 1, Nq: 1, Br: 1, Bc: 1, heads: 1 }, { i: 0, j: 0, bh: 0 }), '');
});

test('every step of every trace is told, in the words of every point of the course', () => {
  const levels = [...new Set([1, ...Object.values(TAUGHT_IN), ...Object.values(TAUGHT_IN).map((n) => n - 1), 15])].filter((n) => n >= 1);
  let told = 0;
  for (const { name, m } of models) {
    const h = m.h;
    for (const upTo of [...levels, Infinity]) {
      const know = new Knowledge(upTo);
      for (const r of m.steps) {
        const said = describe(h, r, know);
        assert.ok(Array.isArray(said) && said.length === 2, `${name}: ${r.kind}`);
        const [title, body] = said;
        const where = `${name} (taught ${upTo}), ${r.kind} (${r.bh}, ${r.i}, ${r.j}): ${title} / ${body}`;
        assert.ok(typeof title === 'string' && title.length > 0 && typeof body === 'string', where);
        assert.ok(!/undefined|NaN|\{\w+\}|null/.test(title + body), where);
        // The untaught flash loop names the lesson that teaches its softmax.
        const untaught = !know.knows('online') && (r.kind === 'flash_step' || r.kind === 'epilogue') && !materialises(h.variant);
        if (untaught) assert.ok(body.includes(know.lesson('online')), where);
        const own = rungs.find((x) => x.name === h.variant)?.steps?.[r.kind];
        if (!untaught && own) assert.strictEqual(title, fill(own.title, h, r, batchHead(h, r.bh)), where);
        else if (!untaught && r.kind === 'flash_step') assert.ok(title.includes(`Q-tile ${r.i} `) && title.includes(`kv-tile ${r.j} `), where);
        // A timing step gives its own time, in µs.
        if (r.kind === 'timing') assert.ok(body.includes(`${(Number(r.tEnd - r.tStart) / 1000).toFixed(2)} µs`), where);
        // An idea not yet taught is not named as if known.
        if (!know.knows('causal') && h.causal && r.kind === 'scores') assert.ok(!body.includes('−∞ above the diagonal: naive'), where);
        told++;
      }
    }
  }
  assert.ok(told > 1000, `${told} steps told`);
});

test('the side by side places each step on one progress axis', (t) => {
  const rng = random(t);
  const computesS = (r) => ['flash_step', 'scores', 'bwd_step', 'bwd_dp'].includes(r.kind);
  let axes = 0;
  for (const { name, m } of models) {
    const keys = keysOf(m);
    const total = m.steps.filter(computesS).length;
    if (!total || m.steps.at(-1) && computesS(m.steps.at(-1))) continue;
    assert.strictEqual(keys.length, m.length, name);
    let seen = 0;
    const lastS = m.steps.findLastIndex(computesS);
    m.steps.forEach((r, k) => {
      if (k <= lastS) {
        if (computesS(r)) seen++;
        assert.strictEqual(keys[k], seen / total, `${name}: key of step ${k}`);
      } else {
        assert.ok(keys[k] > 1 && keys[k] <= 2, `${name}: key of step ${k} after the last score tile: ${keys[k]}`);
        assert.ok(keys[k] > keys[k - 1], `${name}: keys after the last score tile rise`);
      }
    });
    assert.strictEqual(keys.at(-1), 2, name);
    assert.strictEqual(keys[lastS], 1, name);
    axes++;
  }
  assert.ok(axes >= 5, `${axes} traces on the axis`);
  // Two panes' keys on one axis, and the step each shows at a place.
  for (let n = 0; n < 200; n++) {
    const lists = Array.from({ length: 1 + rng.int(3) }, () => {
      const ks = Array.from({ length: rng.int(30) }, () => Math.round(rng.next() * 2 * 64) / 64);
      return ks.sort((a, b) => a - b);
    });
    const pos = positionsOf(lists);
    assert.strictEqual(pos[0], 0);
    for (let k = 1; k < pos.length; k++) assert.ok(pos[k] > pos[k - 1], 'positions rise');
    for (const ks of lists) for (const x of ks) assert.ok(pos.includes(Math.round(x * 1e9) / 1e9));
    for (const x of [...pos, rng.next() * 2]) {
      for (const ks of lists) {
        let want = -1;
        ks.forEach((v, k) => { if (v <= x + 1e-12) want = k; });
        assert.strictEqual(stepAt(ks, x), want, `stepAt(${ks}, ${x})`);
      }
    }
    const steps = Array.from({ length: rng.int(20) }, () => Array.from({ length: 4 }, () => rng.int(1 << 20)));
    const cum = cumulative(steps);
    steps.forEach((_, k) => {
      for (let c = 0; c < 4; c++) assert.strictEqual(cum[k][c], steps.slice(0, k + 1).reduce((a, s) => a + s[c], 0));
    });
  }
});

test('the float64 reference is attention on the float32 inputs, and the mirror\'s output is within float32 of it', () => {
  // tail-*: 30 query rows, the last of 42 positions, under a causal mask
  // aligned to the end; the kernel's O came from the square run.
  let checked = 0;
  for (const name of ['mirror-flash2', 'mirror-naive', 'mirror-flash1', 'tail-flash2', 'tail-naive']) {
    const { m } = models.find((x) => x.name === name);
    const h = m.h;
    for (const [bh, inp] of m.inputs) {
      const ref = reference(inp, h);
      assert.strictEqual(ref.length, h.Nq * h.D, `${name}: a row per query`);
      const o = m.finalO.get(bh);
      let worst = 0;
      for (let r = 0; r < h.Nq; r++) {
        // Softmax by log-sum-exp, a second way to the same weights; query
        // row r is position N − Nq + r.
        const cols = h.causal ? h.N - h.Nq + r + 1 : h.N;
        const s = Array.from({ length: cols }, (_, c) => {
          let dot = 0;
          for (let x = 0; x < h.D; x++) dot += inp.q[r * h.D + x] * inp.k[c * h.D + x];
          return dot / Math.sqrt(h.D);
        });
        const top = Math.max(...s);
        const lse = top + Math.log(s.reduce((a, v) => a + Math.exp(v - top), 0));
        for (let x = 0; x < h.D; x++) {
          const want = s.reduce((a, v, c) => a + Math.exp(v - lse) * inp.v[c * h.D + x], 0);
          const got = ref[r * h.D + x];
          assert.ok(Math.abs(got - want) <= 1e-12 * Math.max(1, Math.abs(want)), `${name}: reference[${r}, ${x}] ${got}, by log-sum-exp ${want}`);
          if (o && !Number.isNaN(o[r * h.D + x])) worst = Math.max(worst, Math.abs(o[r * h.D + x] - want));
        }
      }
      assert.ok(worst < 1e-5, `${name}: the kernel's O is ${worst} from float64`);
      assert.ok(o && !o.some(Number.isNaN), `${name}: every row of O is finished`);
      checked++;
    }
  }
  assert.strictEqual(checked, 6, 'batch-heads held to float64');
});
