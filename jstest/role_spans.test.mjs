// The role lanes' arithmetic (static/js/role_spans.js) held to package
// roles, which it re-implements: for every block of each recorded roles
// run (recordings/, decoded by the page's decoder into its trace model),
// the block's length, its products' union and time in flight, each
// consumer's wait for K, softmax and the part of it under the other's
// products, and the note that gives them, against what roles computed
// (testdata/roles.json); the interval arithmetic on random spans against
// roles' and against counting nanosecond by nanosecond; and the tracks
// that keep overlapping spans apart.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { sub } from '../static/js/steps.js';
import { EVENTS } from '../static/js/trace_abi.js';
import { LANE_OF_ROLE, blockOf, eventWords, isProduct, overlap, pack, stepNote, total, union } from '../static/js/role_spans.js';
import { bytesOf, fixture, random, root, useRungs } from './helpers.mjs';

useRungs();
const fx = fixture('roles.json');
const LANES = ['consumer 0', 'consumer 1'];
const OTHER = { 'consumer 0': 'consumer 1', 'consumer 1': 'consumer 0' };

function load(name) {
  let m = null;
  const reader = new TraceReader({ onHeader: (h) => { m = new TraceModel(h); }, onRecord: (r) => m.add(r) });
  reader.push(bytesOf(`${root}recordings/${name}.fstrace`));
  assert.ok(reader.complete, name);
  return m;
}

const len = (x) => x.e - x.s;

test('every block of every recorded roles run: the figures package roles computes', () => {
  assert.ok(fx.runs.length >= 2);
  let notes = 0;
  for (const run of fx.runs) {
    const m = load(run.name);
    assert.strictEqual(m.roles.size, run.blocks.length, `${run.name}: blocks with role records`);
    let hidden = 0, softmax = 0, inFlight = 0, span = 0, turns = 0, consumer = 0;
    for (const want of run.blocks) {
      const key = `${want.bh},${want.i}`, where = `${run.name} block ${key}`;
      const b = blockOf(m, key);
      assert.ok(b, `${where}: no block`);
      assert.strictEqual(b.key, key);
      assert.strictEqual(b.sm, want.sm, `${where}: SM`);
      assert.strictEqual(b.length, want.length, `${where}: length`);
      assert.strictEqual(total(b.products), want.inFlight, `${where}: ns with a product in flight`);
      assert.strictEqual(b.products.length, want.unions, `${where}: the products' union`);
      if (want.spans) {
        assert.strictEqual(b.spans.length, want.spans.length, `${where}: spans`);
        want.spans.forEach(([role, event, j, s, e], k) => {
          const x = b.spans[k];
          assert.deepEqual([x.r.role, x.lane, x.event, x.j, x.s, x.e], [role, LANE_OF_ROLE[role], event, j, s, e], `${where}: span ${k}`);
        });
        assert.deepEqual(b.products.map((x) => [x.s, x.e]), want.products, `${where}: the products' union`);
      }
      for (const [c, lane] of LANES.entries()) {
        const others = union(b.spans.filter((x) => x.lane === OTHER[lane] && isProduct(x.event)));
        for (const [j, waitK, sm, under] of want.consumers[c]) {
          const s = b.spans.find((x) => x.lane === lane && x.event === 'softmax' && x.j === j);
          const w = b.spans.find((x) => x.lane === lane && x.event === 'wait_k' && x.j === j);
          assert.ok(s && w, `${where}: ${lane}'s softmax and wait for K of kv-tile ${j}`);
          assert.strictEqual(len(s), sm, `${where}: ${lane}'s softmax of kv-tile ${j}`);
          assert.strictEqual(len(w), waitK, `${where}: ${lane}'s wait for K of kv-tile ${j}`);
          assert.strictEqual(overlap(s.s, s.e, others), under, `${where}: ${lane}'s softmax of kv-tile ${j} under ${OTHER[lane]}'s products`);
          // The note says each figure as roles computed it, and with the
          // step held by a lesson, keeps the overlap back.
          const note = stepNote(b, j);
          for (const said of [`${lane}: waited ${waitK} ns for K${sub(j)}`, `softmax ${sm} ns, of which ${under} ns under ${OTHER[lane]}'s products`,
            `a product was in flight ${want.percent}% of its ${(want.length / 1000).toFixed(1)} µs`]) {
            assert.ok(note.startsWith(`kv-tile ${j}: `) && note.includes(said), `${where} kv-tile ${j}: the note does not say "${said}":\n${note}`);
          }
          const held = stepNote(b, j, true);
          assert.ok(held.includes(`softmax ${sm} ns, of which ? (a checkpoint asks) under ${OTHER[lane]}'s products`) && !held.includes(`of which ${under} ns`), `${where} kv-tile ${j} held:\n${held}`);
          hidden += under;
          softmax += sm;
          notes++;
        }
      }
      const ep = want.epilogue.map((n, c) => (n >= 0 ? `${LANES[c]} ${n} ns` : null)).filter(Boolean);
      if (ep.length) assert.ok(stepNote(b, -1).startsWith(`The epilogue: it took ${ep.join(', ')}.`), `${where}: the epilogue's note:\n${stepNote(b, -1)}`);
      inFlight += total(b.products);
      span += b.length;
      for (const x of b.spans) {
        if (!LANES.includes(x.lane)) continue;
        consumer += len(x);
        if (x.event === 'turn_s' || x.event === 'turn_pv') turns += len(x);
      }
    }
    // Summed over the run, the shares roles.Summarise gives.
    assert.strictEqual(hidden / softmax, run.shares.SoftmaxHidden, `${run.name}: softmax under the other consumer's products`);
    assert.strictEqual(inFlight / span, run.shares.ProductsInFlight, `${run.name}: block time with a product in flight`);
    assert.strictEqual(turns / consumer, run.shares.Turns, `${run.name}: consumer time waiting for a turn`);
  }
  assert.ok(notes > 1000, `${notes} notes`);
});

test('union, total and overlap as package roles computes them', () => {
  for (const c of fx.intervals) {
    const u = union(c.spans.map(([s, e]) => ({ s, e })));
    assert.deepEqual(u.map((x) => [x.s, x.e]), c.union, `union of ${JSON.stringify(c.spans)}`);
    assert.strictEqual(total(u), c.total);
    assert.strictEqual(overlap(c.window[0], c.window[1], u), c.overlap, `overlap of [${c.window}) with ${JSON.stringify(c.union)}`);
  }
});

test('union, total and overlap against counting each nanosecond', (t) => {
  const rng = random(t);
  for (let n = 0; n < 500; n++) {
    const T = 50 + rng.int(300);
    const spans = Array.from({ length: rng.int(10) }, (_, order) => {
      const s = rng.int(T);
      return { s, e: s + rng.int(T - s + 1), order };
    });
    const covered = new Array(T).fill(false);
    for (const x of spans) for (let ns = x.s; ns < x.e; ns++) covered[ns] = true;
    const u = union(spans);
    for (let k = 1; k < u.length; k++) assert.ok(u[k].s > u[k - 1].e, 'the union is disjoint and in order, touching intervals joined');
    // Each span of length is in exactly the one interval that covers it.
    for (const x of spans.filter((y) => y.e > y.s)) assert.strictEqual(u.filter((iv) => iv.parts.includes(x)).length, 1);
    const lo = rng.int(T), hi = lo + rng.int(T - lo + 1);
    let all = 0, inside = 0;
    covered.forEach((c, ns) => { if (c) { all++; if (ns >= lo && ns < hi) inside++; } });
    assert.strictEqual(total(u), all, `total of ${JSON.stringify(spans)}`);
    assert.strictEqual(overlap(lo, hi, u), inside, `overlap [${lo}, ${hi}) of ${JSON.stringify(spans)}`);
  }
});

test('spans that overlap in time share no track, each on the first track free', (t) => {
  const rng = random(t);
  for (let n = 0; n < 300; n++) {
    const spans = Array.from({ length: rng.int(12) }, (_, order) => {
      const s = rng.int(100);
      return { s, e: s + rng.int(40), order, group: rng.int(2) };
    });
    const tracks = pack(spans, (x) => x.group);
    assert.ok(tracks >= 1);
    const groups = [...new Set(spans.map((x) => x.group))].sort();
    let base = 0;
    for (const g of groups) {
      const mine = spans.filter((x) => x.group === g).sort((a, b) => a.s - b.s || a.order - b.order);
      const used = new Set(mine.map((x) => x.track));
      const top = Math.max(...used);
      assert.ok([...used].every((k) => k >= base), 'a group\'s tracks follow the last group\'s');
      for (const [k, x] of mine.entries()) {
        // The tracks below its own were busy at its start, by spans placed
        // before it; its own was free.
        for (let tr = base; tr <= x.track; tr++) {
          const busy = mine.slice(0, k).filter((y) => y.track === tr).some((y) => Math.max(y.s, y.e) > x.s);
          assert.strictEqual(busy, tr < x.track, `span ${JSON.stringify(x)} on track ${x.track}: track ${tr} ${busy ? 'busy' : 'free'}`);
        }
      }
      base = top + 1;
    }
    assert.strictEqual(tracks, Math.max(1, base));
  }
});

test('every event a role records has words of its own', () => {
  for (const e of Object.values(EVENTS)) {
    if (e === 'clock') continue;
    const words = eventWords(e, 3);
    assert.notStrictEqual(words, e, e);
    if (['copy_k', 'copy_v', 'free_k', 'free_v', 'wait_k', 'wait_v', 'turn_s', 'turn_pv', 'product_s', 'product_pv'].includes(e)) assert.ok(words.includes('₃'), `${e}: ${words}`);
  }
});
