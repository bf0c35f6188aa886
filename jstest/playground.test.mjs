// The online-softmax playground's arithmetic (static/js/playground_math.js)
// held to the Go port that grades its checkpoints (lessons/playground):
// rounding to float16, bfloat16 and float32 bit for bit, and rows worked
// tile by tile in each type (testdata/playground.json); and the rounding
// on fresh random values against the formats' own tables of values.
import test from 'node:test';
import assert from 'node:assert/strict';
import { bfloat16, dtypes, exact, float16, float32, run } from '../static/js/playground_math.js';
import { fixture, fromBits, num, random } from './helpers.mjs';

const fx = fixture('playground.json');

test('rounding to float16, bfloat16 and float32 as the Go port rounds, bit for bit', () => {
  assert.ok(fx.round.length > 1000);
  for (const c of fx.round) {
    const x = num(c.x);
    for (const [name, f, want] of [['float16', float16, c.f16], ['bfloat16', bfloat16, c.bf16], ['float32', float32, c.f32]]) {
      const got = f(x);
      assert.ok(Object.is(got, num(want)), `${name}(${x}) is ${got}, the Go port's ${num(want)}`);
    }
  }
});

// close: a and b are the same number (NaN only as NaN, ±∞ only as
// itself), or within tol of b relative.
const close = (a, b, tol) => (Number.isFinite(a) && Number.isFinite(b)
  ? Math.abs(a - b) <= tol * Math.max(Math.abs(b), 1e-30)
  : Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)));

test('rows worked tile by tile in each type as the Go port works them', () => {
  // The types' own roundings are exact; an exp may differ in its last bit
  // between JavaScript and Go, which a type's rounding keeps or not.
  const tol = { f32: 1e-6, f16: 1e-3, bf16: 8e-3 };
  assert.ok(fx.runs.length >= 60);
  for (const c of fx.runs) {
    const logits = c.logits.map(num);
    const where = `${c.dtype} tile ${c.tile} max ${c.max} logits ${JSON.stringify(c.logits)}`;
    const r = run({ logits, tile: c.tile, max: c.max, dtype: c.dtype });
    assert.strictEqual(r.stored.length, logits.length, where);
    r.stored.forEach((v, k) => assert.ok(Object.is(v, num(c.stored[k])), `${where}: stored[${k}] ${v}, Go ${num(c.stored[k])}`));
    assert.strictEqual(r.tiles.length, c.tiles.length, `${where}: tiles`);
    r.tiles.forEach((t, k) => {
      const w = c.tiles[k];
      assert.deepEqual([t.start, t.end], [w.start, w.end], `${where}: tile ${k}`);
      for (const f of ['mOld', 'mTile', 'mNew']) assert.ok(Object.is(t[f], num(w[f])), `${where}: tile ${k} ${f} ${t[f]}, Go ${num(w[f])}`);
      for (const f of ['alpha', 'l']) assert.ok(close(t[f], num(w[f]), tol[c.dtype]), `${where}: tile ${k} ${f} ${t[f]}, Go ${num(w[f])}`);
      assert.strictEqual(t.p.length, w.p.length);
      t.p.forEach((p, e) => assert.ok(close(p, num(w.p[e]), tol[c.dtype]), `${where}: tile ${k} p[${e}] ${p}, Go ${num(w.p[e])}`));
    });
    r.weights.forEach((v, k) => assert.ok(close(v, num(c.weights[k]), tol[c.dtype]), `${where}: weight ${k} ${v}, Go ${num(c.weights[k])}`));
    r.exact.forEach((v, k) => assert.ok(close(v, num(c.exact[k]), 1e-12), `${where}: exact ${k} ${v}, Go ${num(c.exact[k])}`));
    assert.strictEqual(r.firstInf, c.firstInf, `${where}: first logit making l inf`);
    assert.strictEqual(r.firstExpInf, c.firstExpInf, `${where}: first logit whose exp overflows`);
  }
});

// The formats' values, from their bits: every finite float16 ascending,
// and bfloat16's neighbours of a float32 by its top 16 bits.
const f16 = (() => {
  const out = [];
  for (let b = 0; b < 0x7c00; b++) {
    const e = b >> 10, m = b & 0x3ff;
    out.push(e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
  }
  return out; // out[k] has mantissa bits k & 0x3ff: even k is an even half
})();

// nearest16 rounds x ≥ 0 to the nearest half, ties to even, inf from the
// midpoint past the largest.
function nearest16(a) {
  if (a >= 65504 + 16) return Infinity;
  let lo = 0, hi = f16.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (f16[mid] <= a) lo = mid; else hi = mid;
  }
  if (a >= f16[hi]) return f16[hi];
  const dl = a - f16[lo], dh = f16[hi] - a;
  return dl < dh ? f16[lo] : dh < dl ? f16[hi] : f16[lo % 2 === 0 ? lo : hi];
}

// nearestBF16 rounds a float32 y to bfloat16: the bfloat16s either side
// by its bits, the nearer, ties to the even one; past the largest, inf.
function nearestBF16(y) {
  const bits = new Uint32Array(new Float32Array([y]).buffer)[0];
  const down = bits & 0xffff0000, up = down + 0x10000;
  const value = (b) => ((b & 0x7fffffff) === 0x7f800000 ? Math.sign(y) * 2 ** 128 : fromBits(b >>> 0));
  const lo = value(down), hi = value(up >>> 0);
  const dl = Math.abs(y - lo), dh = Math.abs(hi - y);
  const pick = dl < dh ? down : dh < dl ? up : ((down >>> 16) & 1) === 0 ? down : up;
  return fromBits(pick >>> 0);
}

test('rounding fresh random values to float16 and bfloat16 lands on the format\'s nearest value', (t) => {
  const rng = random(t);
  for (let n = 0; n < 20000; n++) {
    let x;
    switch (rng.int(4)) {
      case 0: x = (rng.next() + 0.5) * 2 ** (rng.int(60) - 30); break; // across float16's binades
      case 1: { const k = rng.int(f16.length - 1); x = (f16[k] + f16[k + 1]) / 2; break; } // a float16 tie
      case 2: x = (rng.next() + 0.5) * 2 ** (rng.int(260) - 130); break; // across float32's
      default: x = rng.normal() * 10 ** (rng.int(10) - 5);
    }
    if (rng.int(2)) x = -x;
    const want16 = Math.sign(x) * nearest16(Math.abs(x));
    assert.ok(Object.is(float16(x), want16), `float16(${x}) is ${float16(x)}, the nearest half ${want16}`);
    const y = Math.fround(x);
    const wantBF = Number.isFinite(y) ? nearestBF16(y) : y;
    assert.ok(Object.is(bfloat16(x), wantBF), `bfloat16(${x}) is ${bfloat16(x)}, the nearest bfloat16 ${wantBF}`);
    assert.ok(Object.is(float32(x), y));
  }
  assert.ok(Number.isNaN(float16(NaN)) && Number.isNaN(bfloat16(NaN)) && Number.isNaN(float32(NaN)));
});

test('in float32 with the max subtracted, a random row\'s weights are its softmax', (t) => {
  const rng = random(t);
  for (let n = 0; n < 300; n++) {
    const logits = Array.from({ length: 1 + rng.int(fx.maxLogits) }, () => Math.round(rng.normal() * rng.pick([1, 10, 60, 1e3]) * 1000) / 1000);
    const tile = 1 + rng.int(logits.length);
    const r = run({ logits, tile, max: true, dtype: 'f32' });
    // The softmax of the row as float32 stores it, in float64.
    const want = exact(r.stored);
    assert.strictEqual(r.firstInf, -1);
    assert.strictEqual(r.tiles.length, Math.ceil(logits.length / tile));
    assert.strictEqual(r.tiles.at(-1).mNew, Math.max(...r.stored));
    r.weights.forEach((w, k) => assert.ok(Math.abs(w - want[k]) <= 1e-5 * want[k] + 1e-12, `row ${logits}, tile ${tile}: weight ${k} ${w}, softmax ${want[k]}`));
    assert.ok(Math.abs(want.reduce((a, b) => a + b, 0) - 1) < 1e-12);
  }
  assert.deepEqual(Object.keys(dtypes).sort(), ['bf16', 'f16', 'f32']);
});
