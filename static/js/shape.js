// A run's shape as the pages read it (trace format v4): Nq query rows, the
// last Nq of the N positions, against N keys, and heads query heads over
// kvHeads heads of K and V (grouped-query attention: heads/kvHeads query
// heads read one K and V). Query row r (0-based, r < Nq) is position
// N − Nq + r; under a causal mask it sees keys 0 to N − Nq + r, the mask
// aligned to the end. A square run (Nq = N, kvHeads = heads; every trace
// before version 4) reads as it always did: every function here gives it
// the numbers and the words the pages gave it before. Nothing here touches
// the page: Node's tests import it.
import { fmtBytes } from './format.js';

// square: as many queries as keys.
export const square = (h) => h.Nq === h.N;

// grouped: fewer heads of K and V than query heads.
export const grouped = (h) => h.kvHeads !== h.heads;

// queryOffset is the position of query row 0 (0 in a square run).
export const queryOffset = (h) => h.N - h.Nq;

// rowEnd is one past q-tile i's last query row; keyEnd one past kv-tile j's
// last key.
export const rowEnd = (h, i) => Math.min(h.Nq, (i + 1) * h.Br);
export const keyEnd = (h, j) => Math.min(h.N, (j + 1) * h.Bc);

// rowsRange is q-tile i's query rows, "8–15"; keysRange kv-tile j's keys.
export const rowsRange = (h, i) => `${i * h.Br}–${rowEnd(h, i) - 1}`;
export const keysRange = (h, j) => `${j * h.Bc}–${keyEnd(h, j) - 1}`;

// positionsRange is q-tile i's rows as positions of the sequence, "24–31":
// what its rows are called where a run has fewer queries than keys.
export const positionsRange = (h, i) => `${queryOffset(h) + i * h.Br}–${queryOffset(h) + rowEnd(h, i) - 1}`;

// lastKvTile is the last kv-tile q-tile i's block visits: under a causal
// mask the one holding the last key its last row sees (the kv-tiles past it
// lie wholly above the shifted diagonal and are skipped); else the last.
export const lastKvTile = (h, i) =>
  (h.causal ? Math.min(h.Tc - 1, Math.floor((queryOffset(h) + rowEnd(h, i) - 1) / h.Bc)) : h.Tc - 1);

// firstQTile is the first q-tile any of whose rows sees a key of kv-tile j:
// under a causal mask the one holding the row at position j·Bc (those above
// see none of its keys; kernels.bwdFirstQTile); else the first.
export const firstQTile = (h, j) => (h.causal ? Math.floor(Math.max(0, j * h.Bc - queryOffset(h)) / h.Br) : 0);

// masked says whether tile (i, j) lies wholly above the causal diagonal:
// every key of kv-tile j is after every query of q-tile i.
export const masked = (h, i, j) => h.causal && j > lastKvTile(h, i);

// scoresShape names S's shape in the pages' words: N×N, or Nq×N where the
// run has fewer queries than keys. scoresCount is its number of elements.
export const scoresShape = (h) => (square(h) ? 'N×N' : 'Nq×N');
export const scoresCount = (h) => (square(h) ? 'N²' : 'Nq·N');

// rowsName is what the query rows number: N, or Nq.
export const rowsName = (h) => (square(h) ? 'N' : 'Nq');

// elementBytes is the size of an element of Q, K, V and O (and of naive's
// P): 2 in bf16 (the tensor-core rungs), else 4, as package traffic counts.
export const elementBytes = (h) => (h.dtype === 'bf16' ? 2 : 4);

// runBytes is what the run's arrays take in device memory over every
// batch-head: Q and O are Nq×d for each query head, K and V N×d for each
// head of K and V (batch × kvHeads of them: a group's query heads share
// one); naive's S (float32) and P are Nq×N for each query head, as are the
// backward's dP and dS (float32); rows is one float32 a query row (LSE, or
// the backward's D).
export function runBytes(h) {
  const el = elementBytes(h);
  const qHeads = h.batch * h.heads, kvHeads = h.batch * h.kvHeads;
  const qo = qHeads * h.Nq * h.D * el, kv = kvHeads * h.N * h.D * el;
  const scores = qHeads * h.Nq * h.N;
  return { q: qo, k: kv, v: kv, o: qo, s: scores * 4, p: scores * el, rows: qHeads * h.Nq * 4 };
}

// headBytes is runBytes of one query head and its K and V.
export const headBytes = (h) => runBytes({ ...h, batch: 1, heads: 1, kvHeads: 1 });

// shapeNote says, for a run with fewer queries than keys or grouped heads,
// what its Q, O, K and V take and the least a kernel can move (each read
// once, O written once): what makes decoding a stream of K and V. A square
// run without grouping gets '' (its pages say what they always said).
export function shapeNote(h) {
  if (square(h) && !grouped(h)) return '';
  const b = runBytes(h);
  const heads = h.batch * h.heads, kvHeads = h.batch * h.kvHeads;
  const group = h.heads / h.kvHeads;
  const rows = square(h) ? 'N×d' : `Nq×d (Nq = ${h.Nq})`;
  const share = group > 1 ? `, each read by its group of ${group} query heads` : '';
  return `Q and O take ${fmtBytes(b.q + b.o)} (${rows} for each of ${heads} query head${heads === 1 ? '' : 's'}); ` +
    `K and V take ${fmtBytes(b.k + b.v)} (N×d, N = ${h.N}, for each of ${kvHeads} K/V head${kvHeads === 1 ? '' : 's'}${share}). ` +
    `The least a kernel can move, reading Q, K and V once and writing O once: ${fmtBytes(b.q + b.k + b.v + b.o)}.`;
}

// gridGeometry lays S's tiles out in a box size pixels wide: a column per
// key, size/N pixels each, and a row per query row. A square run's grid is
// square and to scale; one with fewer queries is as tall as its rows to
// scale (to the pixel), but no shorter than minRow pixels a q-tile (a
// decode's one row would be a hairline) nor taller than wide. diagonal is the causal mask's
// edge, from query row 0's first masked key to the last row's: (0, 0) to
// (size, size) when square.
export function gridGeometry(h, size, minRow = 24) {
  const px = size / h.N;
  const height = square(h) ? size : Math.round(Math.min(size, Math.max(size * h.Nq / h.N, minRow * h.Tr)));
  const py = square(h) ? px : height / h.Nq;
  return { width: size, height, px, py, diagonal: [queryOffset(h) * px, 0, size, height] };
}

// tileRect is tile (i, j)'s place in a gridGeometry, [x, y, w, h]: ragged
// last tiles at their true, smaller size.
export function tileRect(h, g, i, j) {
  return [j * h.Bc * g.px, i * h.Br * g.py, Math.min(h.Bc, h.N - j * h.Bc) * g.px, Math.min(h.Br, h.Nq - i * h.Br) * g.py];
}
