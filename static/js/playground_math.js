// The online-softmax playground's arithmetic: one row of logits in tiles,
// with every intermediate rounded to float32, float16 or bfloat16 as that
// type rounds it. The server grades the playground's checkpoints with the
// same arithmetic in Go (lessons/playground); a browser test holds the two
// to each other, so change both or neither.

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

// roundHalfEven rounds v to a whole number, ties to the even one (Math.round
// sends ties up, which is not what IEEE rounding does).
function roundHalfEven(v) {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

// float32: JavaScript's own rounding, ties to even, overflow to inf.
export const float32 = Math.fround;

// float16 rounds x to the nearest IEEE half: 11 significant bits,
// subnormals below 2⁻¹⁴ sharing the spacing 2⁻²⁴, and inf from 65520 up
// (the midpoint between 65504, the largest half, and 65536).
export function float16(x) {
  if (x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  if (a >= 65520) return Math.sign(x) * Infinity;
  // e = floor(log2 a), corrected where log2 rounds across a power of two.
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  e = Math.max(e, -14);
  const q = 2 ** (e - 10);
  return Math.sign(x) * roundHalfEven(a / q) * q;
}

// bfloat16 rounds as a conversion from float32 does: to float32, then the
// float32's bits to their top 16, ties to even; the carry of an overflow
// runs into the exponent and makes inf.
export function bfloat16(x) {
  f32buf[0] = x;
  if (Number.isNaN(f32buf[0])) return NaN;
  let b = u32buf[0];
  b = (b + 0x7fff + ((b >>> 16) & 1)) >>> 0;
  u32buf[0] = (b & 0xffff0000) >>> 0;
  return f32buf[0];
}

export const dtypes = {
  f32: { name: 'float32', round: float32 },
  f16: { name: 'float16', round: float16 },
  bf16: { name: 'bfloat16', round: bfloat16 },
};

// exact is the softmax of xs in float64 with the max subtracted.
export function exact(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

// run works a row through the online softmax, tile by tile:
//   m_new = max(m_old, max of the tile), α = exp(m_old − m_new),
//   l = α·l, then l += exp(s − m_new) for each logit of the tile in order;
// with the max subtraction off, exp(s) and α = 1. The weights are
// exp(s − m)/l after the last tile. firstInf is the logit whose term first
// made l inf (−1 if none), firstExpInf the first whose exp alone overflowed.
export function run({ logits, tile, max: subtractMax, dtype }) {
  const r = dtypes[dtype].round;
  const stored = logits.map(r);
  const base = (m) => (!subtractMax || m === -Infinity ? 0 : m);
  const tiles = [];
  let m = -Infinity;
  let l = 0;
  let firstInf = -1;
  let firstExpInf = -1;
  for (let start = 0; start < stored.length; start += tile) {
    const end = Math.min(start + tile, stored.length);
    const t = { start, end, mOld: m, mTile: -Infinity, p: [] };
    for (let k = start; k < end; k++) t.mTile = Math.max(t.mTile, stored[k]);
    t.mNew = Math.max(m, t.mTile);
    const b = base(t.mNew);
    t.alpha = subtractMax ? r(Math.exp(r(m - b))) : 1;
    l = r(t.alpha * l);
    for (let k = start; k < end; k++) {
      const p = r(Math.exp(r(stored[k] - b)));
      t.p.push(p);
      if (p === Infinity && firstExpInf < 0) firstExpInf = k;
      l = r(l + p);
      if (l === Infinity && firstInf < 0) firstInf = k;
    }
    t.l = l;
    m = t.mNew;
    tiles.push(t);
  }
  const b = base(m);
  const weights = stored.map((x) => r(r(Math.exp(r(x - b))) / l));
  return { stored, tiles, weights, exact: exact(logits), firstInf, firstExpInf };
}
