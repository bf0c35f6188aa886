// How the views write numbers (static/js/format.js): a float32 in a few
// significant digits, a byte count in binary units, and an axis's round
// tick steps, each on fresh random values against what the number is.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fmt, fmtBytes, niceStep } from '../static/js/format.js';
import { random } from './helpers.mjs';

// digitsOf counts the significant digits of a decimal mantissa (an
// integer's trailing zeros are places, not digits).
const digitsOf = (m) => {
  const x = m.replace(/^[−-]/, '');
  return (x.includes('.') ? x.replace('.', '') : x.replace(/0+$/, '')).replace(/^0+/, '').length || 1;
};

test('a float32 is written in the digits asked, within half of the last one, with a real minus sign', (t) => {
  const rng = random(t);
  for (let n = 0; n < 20000; n++) {
    const v = Math.fround(rng.normal() * 10 ** (rng.int(16) - 8));
    const d = 2 + rng.int(6);
    const s = fmt(v, d);
    const where = `fmt(${v}, ${d}) = ${s}`;
    if (v === 0) { assert.strictEqual(s, '0', where); continue; }
    assert.ok(!/^-/.test(s) && (v < 0) === s.startsWith('−'), where);
    const [mantissa, exp] = s.replace('−', '-').split('e');
    const got = Number(s.replace(/−/g, '-'));
    assert.ok(Number.isFinite(got), where);
    const a = Math.abs(v);
    const plain = a >= 1e-3 && a < 1e4;
    assert.strictEqual(exp === undefined, plain, `${where}: plain from 0.001 to 10⁴, else with an exponent`);
    // d significant digits in plain form (d − 1 with an exponent), and
    // trailing zeros only where the exponent form keeps its digits.
    const kept = plain ? d : d - 1;
    assert.ok(digitsOf(mantissa) <= kept, `${where}: more than ${kept} digits`);
    if (!plain) assert.strictEqual(digitsOf(mantissa), kept, `${where}: ${kept} digits`);
    const unit = 10 ** (Math.floor(Math.log10(a)) - kept + 1);
    assert.ok(Math.abs(got - v) <= unit / 2 * (1 + 1e-9), `${where}: more than half a unit of the last digit from ${v}`);
  }
  assert.deepEqual([fmt(Infinity), fmt(-Infinity), fmt(NaN), fmt(-0)], ['+∞', '−∞', 'NaN', '0']);
});

test('a byte count is written in the largest binary unit under 1024 of it', (t) => {
  const rng = random(t);
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  for (let n = 0; n < 20000; n++) {
    const bytes = Math.floor(rng.next() * 2 ** rng.int(50));
    const s = fmtBytes(bytes);
    if (bytes < 1024) { assert.strictEqual(s, `${bytes} B`); continue; }
    const [, value, unit] = /^(\d+\.\d+) (\w+)$/.exec(s) ?? [];
    const u = units.indexOf(unit);
    assert.ok(u >= 0, `fmtBytes(${bytes}) = ${s}`);
    const exact = bytes / 1024 ** (u + 1);
    assert.ok(exact >= 1 && (exact < 1024 || u === units.length - 1), `fmtBytes(${bytes}) = ${s}: the unit`);
    const decimals = exact < 10 ? 2 : 1;
    assert.strictEqual(value.split('.')[1].length, decimals, `fmtBytes(${bytes}) = ${s}: decimals`);
    assert.ok(Math.abs(Number(value) - exact) <= 0.5 * 10 ** -decimals + 1e-12, `fmtBytes(${bytes}) = ${s}, ${exact} ${unit}`);
  }
});

test('a tick step is 1, 2 or 5 times a power of ten, near the step asked', (t) => {
  const rng = random(t);
  for (let n = 0; n < 20000; n++) {
    const x = (rng.next() + 1e-9) * 10 ** (rng.int(24) - 12);
    const s = niceStep(x);
    const p = 10 ** Math.floor(Math.log10(s) + 1e-9);
    assert.ok([1, 2, 5, 10].some((m) => Math.abs(s - m * p) <= 1e-9 * s), `niceStep(${x}) = ${s}`);
    assert.ok(s / x > 0.57 && s / x <= 1.43 + 1e-9, `niceStep(${x}) = ${s}: ${s / x} of it`);
  }
});
