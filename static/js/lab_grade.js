// What every lab exercise's grader shares (each exercise's own grade.js, in
// its folder of lab/exercises, builds the calls and reads the answers): the
// tolerance a student's numbers are held to, the kernel trace's arrays as
// the plain nested arrays a student works with, a seeded generator for the
// hidden cases, and float64 references to hold those to.

// A student works in float64, the kernels in float32 (flash2 rounds every
// operation to float32 and uses expf), so the two differ by a few float32
// roundings along a row: a few 1e-7, relative. A slip (a missing rescale,
// a mask off by one) moves a number by its own size. The tolerance sits
// between: REL of the kernel's value plus ABS of the largest value the
// compared row holds, so that a tiny element of a large row is not held
// tighter than its row's rounding.
export const REL = 1e-4;
export const ABS = 1e-4;

// within says whether a student's y matches the kernel's k, with scale the
// size of the row k comes from. NaN never matches; ±∞ matches only itself.
export function within(y, k, scale) {
  if (typeof y !== 'number' || Number.isNaN(y) || Number.isNaN(k)) return false;
  if (!Number.isFinite(k) || !Number.isFinite(y)) return y === k;
  return Math.abs(y - k) <= REL * Math.abs(k) + ABS * scale;
}

// scaleOf is the largest finite |value| of a row (1e-30 when all are 0).
export function scaleOf(values) {
  let s = 1e-30;
  for (const v of values) if (Number.isFinite(v)) s = Math.max(s, Math.abs(v));
  return s;
}

// firstMiss is the first index where ys misses ks, or -1.
export function firstMiss(ys, ks) {
  const scale = scaleOf(ks);
  for (let x = 0; x < ks.length; x++) if (!within(ys?.[x], ks[x], scale)) return x;
  return -1;
}

// nested reads rows×cols floats of a trace array (row stride `stride`,
// from element `offset`) into an array of rows.
export function nested(values, rows, cols, stride = cols, offset = 0) {
  const out = [];
  for (let r = 0; r < rows; r++) out.push(Array.from(values.subarray(offset + r * stride, offset + r * stride + cols)));
  return out;
}

export const zeros = (n) => new Array(n).fill(0);

// shapeError says, in words, how a student's array is not rows long (of
// cols each, if given); '' when it is.
export function shapeError(name, a, rows, cols) {
  if (!Array.isArray(a)) return `your ${name} is ${a === undefined ? 'missing' : `not an array (${typeof a})`}`;
  if (a.length !== rows) return `your ${name} has ${a.length} rows; the q-tile has ${rows}`;
  if (cols !== undefined) {
    for (let r = 0; r < rows; r++) {
      if (!Array.isArray(a[r]) || a[r].length !== cols) return `row ${r} of your ${name} is not ${cols} numbers long`;
    }
  }
  return '';
}

// random is a seeded generator (mulberry32): the hidden cases of a verdict
// can be drawn again from its seed.
export function random(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  const normal = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  const matrix = (rows, cols, sd = 1) => Array.from({ length: rows }, () => Array.from({ length: cols }, () => sd * normal()));
  return { next, int, normal, matrix };
}

// onlineStep is the float64 reference of one kv-tile's update (exercise
// 1's answer, which the hidden cases hold a student's to).
export function onlineStep(mOld, lOld, oOld, S, V) {
  const m = [], l = [], O = [];
  for (let r = 0; r < S.length; r++) {
    const mNew = Math.max(mOld[r], ...S[r]);
    const base = mNew === -Infinity ? 0 : mNew;
    const alpha = Math.exp(mOld[r] - base);
    const o = oOld[r].map((v) => alpha * v);
    let sum = 0;
    S[r].forEach((s, c) => {
      const p = Math.exp(s - base);
      sum += p;
      V[c].forEach((v, x) => { o[x] += p * v; });
    });
    m.push(mNew);
    l.push(alpha * lOld[r] + sum);
    O.push(o);
  }
  return { m, l, O };
}

// attention is the float64 reference of rows of softmax(Q Kᵀ·scale) V and
// their LSE, the rows being sequence rows qStart, qStart+1, ….
export function attention(Q, K, V, scale, causal, qStart = 0) {
  return Q.map((q, r) => {
    const s = K.map((k, c) => (causal && c > qStart + r ? -Infinity : scale * k.reduce((acc, kx, x) => acc + kx * q[x], 0)));
    const m = Math.max(...s);
    const p = s.map((v) => (v === -Infinity ? 0 : Math.exp(v - m)));
    const l = p.reduce((a, b) => a + b, 0);
    const o = V[0].map((_, x) => p.reduce((acc, pc, c) => acc + pc * V[c][x], 0) / l);
    return { o, lse: m + Math.log(l) };
  });
}
