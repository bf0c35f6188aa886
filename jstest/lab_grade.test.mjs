// The lab's tolerance (static/js/lab_grade.js), which a loop exercise's
// grader holds a student's numbers to, held to the kernel track's
// (lab.Within, lab.ScaleOf in Go): the same constants, the same verdict
// at the bound's edges, on ±∞ and NaN, and on random numbers.
import test from 'node:test';
import assert from 'node:assert/strict';
import { ABS, REL, firstMiss, scaleOf, within } from '../static/js/lab_grade.js';
import { fixture, num, random } from './helpers.mjs';

const fx = fixture('lab.json');

test('the tolerance is the kernel track\'s', () => {
  assert.strictEqual(REL, fx.rel);
  assert.strictEqual(ABS, fx.abs);
  assert.ok(fx.within.length > 200);
  for (const c of fx.within) {
    const [y, k, scale] = [num(c.y), num(c.k), num(c.scale)];
    assert.strictEqual(within(y, k, scale), c.within, `within(${y}, ${k}, ${scale})`);
  }
  for (const c of fx.scaleOf) assert.ok(Object.is(scaleOf(c.values.map(num)), num(c.scale)), `scaleOf(${c.values})`);
});

test('at the bound\'s edge, a number just inside passes and just outside fails; NaN never passes', (t) => {
  const rng = random(t);
  // The bound from the kernel track's constants, not the module's: a
  // tolerance loosened in the page fails here.
  for (let n = 0; n < 2000; n++) {
    const k = rng.normal() * 10 ** (rng.int(12) - 6), scale = Math.abs(k) * 10 ** (rng.next() * 3) + 1e-30;
    const bound = fx.rel * Math.abs(k) + fx.abs * scale;
    const f = rng.next() * 0.98;
    const side = rng.int(2) ? 1 : -1;
    assert.ok(within(k + side * f * bound, k, scale), `within(${k} ${side > 0 ? '+' : '−'} ${f}·bound)`);
    assert.ok(!within(k + side * (1.02 + rng.next()) * bound, k, scale), `within(${k} ${side > 0 ? '+' : '−'} >1·bound)`);
    assert.ok(!within(NaN, k, scale) && !within(k, NaN, scale) && !within(Infinity, k, scale));
  }
  assert.ok(within(-Infinity, -Infinity, 1) && within(Infinity, Infinity, 1));
  assert.ok(!within(-1e30, -Infinity, 1) && !within(Infinity, -Infinity, 1));
  assert.ok(!within('2', 2, 1), 'a string is no number');
  assert.strictEqual(firstMiss([1, 2, 3], [1, 2, 3]), -1);
  assert.strictEqual(firstMiss([1, 2.5, 3], [1, 2, 3]), 1);
  assert.strictEqual(firstMiss([1, 2], [1, 2, 3]), 2);
});
