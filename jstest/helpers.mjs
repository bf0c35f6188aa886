// What the front end's unit tests share: the fixtures the Go side writes
// (testdata/, go test ./jstest -run TestFixtures -update), a seeded
// random source whose seed a failing test prints (JSTEST_SEED=N replays
// it), and exact comparison of float32s by their bits.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { rungs } from '../static/js/rungs.js';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const testdata = (name) => fileURLToPath(new URL(`testdata/${name}`, import.meta.url));

// fixture is testdata/NAME parsed as JSON.
export const fixture = (name) => JSON.parse(readFileSync(testdata(name), 'utf8'));

// bytesOf is a file as a Uint8Array (testdata/NAME, or a path from the
// repository's root).
export const bytesOf = (path) => new Uint8Array(readFileSync(path.startsWith('/') ? path : testdata(path)));

// num reads a fixture's number: JSON numbers, and "Infinity", "-Infinity"
// and "NaN" for the values JSON has none for.
export const num = (v) => (typeof v === 'string' ? Number(v) : v);

// useRungs gives the modules the rungs a page carries (kernels.RungsForPages):
// the steps' words and the trace model read them.
export function useRungs() {
  if (rungs.length === 0) rungs.push(...fixture('rungs.json'));
  return rungs;
}

// seed is this run's: JSTEST_SEED's, or a fresh one.
export const seed = Number(process.env.JSTEST_SEED) >>> 0 || (Math.random() * 2 ** 32) >>> 0;

// random is t's seeded source (mulberry32, a stream per test name). The
// seed goes out as the test's diagnostic, which its report shows when it
// fails.
export function random(t) {
  let a = seed;
  for (const c of t.name) a = Math.imul(a ^ c.charCodeAt(0), 0x9e3779b1) >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  t.diagnostic(`random inputs from seed ${seed}: JSTEST_SEED=${seed} replays them`);
  return {
    next,
    int: (n) => Math.floor(next() * n),
    normal: () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next()),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
  };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

// bitsOf is the bits of a float32 value v.
export function bitsOf(v) {
  f32[0] = v;
  return u32[0];
}

// fromBits is the float32 whose bits are b.
export function fromBits(b) {
  u32[0] = b;
  return f32[0];
}

const isNaNBits = (b) => (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0;

// sameFloat32 says whether v (a number the page holds) is the float32
// whose bits are want: a NaN any NaN, anything else bit for bit (so −0 is
// not 0, and no NaN passes for a number).
export function sameFloat32(v, want) {
  if (isNaNBits(want)) return Number.isNaN(v);
  return typeof v === 'number' && !Number.isNaN(v) && bitsOf(v) === want && Object.is(fromBits(want), v);
}

// same says whether two float64s are the same value: NaN only for NaN, −0
// only for −0.
export const same = (a, b) => Object.is(a, b);
