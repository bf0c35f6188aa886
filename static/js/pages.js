// A paged KV cache (the decode_paged rung) as the pages read it: the pool
// holds batch·Tc pages, a kv-tile of every K/V head each, and batch row
// b's block table lists the page of each of its kv-tiles. Where the pages
// fall is kernels.PageOf, a rule of the run's shape and seed, mirrored
// here and held to it by a fixture the Go side writes (pages.json).
// Nothing here touches the page: Node's tests import it.
import { rung } from './rungs.js';

// paged: the trace's rung reads its cache through a block table (the
// registry says so: kernels.PageRung's paged).
export const paged = (h) => rung(h.variant)?.paged === true;

// poolPages is the pool's size in pages: one for each kv-tile of each
// batch row.
export const poolPages = (h) => h.batch * h.Tc;

const gcd = (a, b) => { while (b) [a, b] = [b, a % b]; return a; };

// pageStride is kernels.pageStride: the first number from 0.618·pages up
// that shares no factor with pages (so the map below is one to one).
export function pageStride(pages) {
  let a = Math.max(1, Math.floor(pages * 618034 / 1000000));
  while (gcd(a, pages) !== 1) a++;
  return a;
}

// pageOf is kernels.PageOf: the page holding kv-tile j of batch row b,
// ((b·Tc + j)·stride + seed) mod pages. The seed is the header's decimal
// string (a 64-bit number), reduced exactly.
export function pageOf(h, b, j) {
  const pages = poolPages(h);
  const c = Number(BigInt(h.seed) % BigInt(pages));
  // (b·Tc + j)·stride < pages², exact in a double while pages < 2^26.
  return ((b * h.Tc + j) * pageStride(pages) + c) % pages;
}

// pageTable is batch row b's block table: the page of each kv-tile.
export const pageTable = (h, b) => Array.from({ length: h.Tc }, (_, j) => pageOf(h, b, j));

// batchRowOf is the batch row of batch-head bh.
export const batchRowOf = (h, bh) => Math.floor(bh / h.heads);

// kvHeadOf is the head of K and V that query batch-head bh reads.
export const kvHeadOf = (h, bh) => Math.floor((bh % h.heads) / (h.heads / h.kvHeads));
