// A run's shape (static/js/shape.js) and what the pages draw and count of
// it: fewer queries than keys (Nq < N, query row r at position N − Nq + r,
// the causal mask aligned to the end) and grouped heads (kvHeads < heads),
// over the fixtures with those shapes (shapes: 21 of 37 rows, 4 heads over
// 2; tail-flash2 and tail-naive: the last 30 of 42 rows of a causal mirror
// run, 2 heads over 1), held against a square run's numbers, which must not
// move.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader } from '../static/js/trace.js';
import { TraceModel } from '../static/js/model.js';
import { describe, materialises } from '../static/js/steps.js';
import { fmtBytes } from '../static/js/format.js';
import {
  firstQTile, gridGeometry, headBytes, keysRange, lastKvTile, masked, positionsRange, queryOffset, rowsRange, runBytes,
  scoresCount, scoresShape, shapeNote, square, tileRect,
} from '../static/js/shape.js';
import { largestBuffer, squareLabels } from '../static/js/compare_memory.js';
import { bytesOf, fixture, random, useRungs } from './helpers.mjs';

useRungs();

function load(file) {
  let m = null;
  const records = [];
  const reader = new TraceReader({ onHeader: (h) => { m = new TraceModel(h); }, onRecord: (r) => { records.push(r); m.add(r); } });
  reader.push(bytesOf(`traces/${file}.fstrace`));
  assert.ok(reader.complete, file);
  return { name: file, m, h: m.h, records };
}
const all = fixture('traces/index.json').traces.filter((e) => e.file === e.summary).map((e) => load(e.file));
const named = (name) => all.find((t) => t.name === name);
const squares = all.filter((t) => t.h.Nq === t.h.N && t.h.kvHeads === t.h.heads);

test('the fixtures hold the shapes these tests need', () => {
  const want = { shapes: [37, 21, 4, 2], 'tail-flash2': [42, 30, 2, 1], 'tail-naive': [42, 30, 2, 1] };
  for (const [name, [N, Nq, heads, kvHeads]] of Object.entries(want)) {
    const { h } = named(name);
    assert.deepEqual([h.N, h.Nq, h.heads, h.kvHeads], [N, Nq, heads, kvHeads], name);
    assert.ok(h.causal, name);
  }
  assert.ok(squares.length >= 8, `${squares.length} square traces`);
});

test('the model\'s grid has a row of tiles per q-tile of the queries, a column per kv-tile of the keys', () => {
  // Br 8, Bc 8: 21 rows are 3 q-tiles (not 37's 5), 37 keys 5 kv-tiles;
  // Br 4, Bc 8: 30 rows are 8 q-tiles (not 42's 11), 42 keys 6 kv-tiles.
  for (const [name, Tr, Tc] of [['shapes', 3, 5], ['tail-flash2', 8, 6], ['tail-naive', 8, 6]]) {
    const { m, h } = named(name);
    assert.deepEqual([h.Tr, h.Tc], [Tr, Tc], `${name}: Tr × Tc`);
    for (let k = 0; k < m.length; k++) assert.strictEqual(m.tileStates(k).length, Tr * Tc, `${name}: tile states at step ${k}`);
    // Every step is of a q-tile of the queries, and the last is reached.
    const qTiles = new Set(m.steps.filter((r) => r.i >= 0).map((r) => r.i));
    assert.deepEqual([...qTiles].sort((a, b) => a - b), Array.from({ length: Tr }, (_, i) => i), `${name}: the q-tiles stepped`);
    // The last q-tile is ragged where Br does not divide Nq: 21 = 2·8 + 5.
    const last = m.steps.find((r) => r.i === Tr - 1 && r.kind === 'epilogue');
    assert.strictEqual(last.rowsValid, h.Nq - (Tr - 1) * h.Br, `${name}: the last q-tile's rows`);
    // The finished output has a row per query.
    for (const [, o] of m.finalO) assert.strictEqual(o.length, h.Nq * h.D, `${name}: O's rows`);
  }
});

// brute is the causal mask tile by tile, element by element: whether every
// key of kv-tile j is after the position of every query row of q-tile i.
function bruteMasked(h, i, j) {
  if (!h.causal) return false;
  for (let r = i * h.Br; r < Math.min(h.Nq, (i + 1) * h.Br); r++) {
    for (let c = j * h.Bc; c < Math.min(h.N, (j + 1) * h.Bc); c++) if (c <= h.N - h.Nq + r) return false;
  }
  return true;
}

test('each q-tile visits the kv-tiles up to the shifted diagonal, and skips the rest', () => {
  const { m, h, records } = named('tail-flash2');
  assert.strictEqual(queryOffset(h), 12);
  // Query rows 0–3 are positions 12–15: keys 0–15, kv-tiles 0 and 1.
  assert.deepEqual(Array.from({ length: h.Tr }, (_, i) => lastKvTile(h, i)), [1, 2, 2, 3, 3, 4, 4, 5]);
  for (let i = 0; i < h.Tr; i++) {
    // The kernel's own walk (the mirror's, in the fixture).
    const visited = records.filter((r) => r.kind === 'flash_step' && r.i === i).map((r) => r.j);
    assert.deepEqual(visited, Array.from({ length: lastKvTile(h, i) + 1 }, (_, j) => j), `q-tile ${i}'s kv-tiles`);
    for (let j = 0; j < h.Tc; j++) assert.strictEqual(masked(h, i, j), bruteMasked(h, i, j), `tile (${i}, ${j})`);
  }
  // Once a q-tile has finished, the model calls its masked tiles skipped
  // and no other.
  const end = m.tileStates(m.length - 1);
  let skipped = 0;
  for (let i = 0; i < h.Tr; i++) {
    for (let j = 0; j < h.Tc; j++) {
      const st = end[i * h.Tc + j];
      assert.strictEqual(st === 'skipped', masked(h, i, j), `tile (${i}, ${j}) is ${st}`);
      skipped += st === 'skipped';
    }
  }
  // 6·8 tiles, of which 4+3+3+2+2+1+1+0 lie above the diagonal; a square
  // mask's would be more.
  assert.strictEqual(skipped, 16);
  const squareMask = { ...h, Nq: h.N };
  assert.notDeepEqual(Array.from({ length: h.Tr }, (_, i) => lastKvTile(squareMask, i)), Array.from({ length: h.Tr }, (_, i) => lastKvTile(h, i)));
});

test('the shifted diagonal tile by tile, on random shapes, is the mask element by element', (t) => {
  const rng = random(t);
  for (let n = 0; n < 400; n++) {
    const N = 1 + rng.int(rng.int(2) ? 40 : 300);
    const h = { N, Nq: rng.int(3) === 0 ? N : 1 + rng.int(N), Br: 1 + rng.int(20), Bc: 1 + rng.int(20), causal: rng.int(4) !== 0 };
    h.Tr = Math.ceil(h.Nq / h.Br);
    h.Tc = Math.ceil(h.N / h.Bc);
    const what = JSON.stringify(h);
    for (let i = 0; i < h.Tr; i++) {
      let last = -1;
      for (let j = 0; j < h.Tc; j++) {
        assert.strictEqual(masked(h, i, j), bruteMasked(h, i, j), `${what}: tile (${i}, ${j})`);
        if (!bruteMasked(h, i, j)) last = j;
      }
      // Every q-tile sees key 0 at least; the masked tiles are the last ones.
      assert.strictEqual(lastKvTile(h, i), last, `${what}: q-tile ${i}'s last kv-tile`);
    }
    for (let j = 0; j < h.Tc; j++) {
      let first = 0;
      while (first < h.Tr && bruteMasked(h, first, j)) first++;
      assert.strictEqual(firstQTile(h, j), first, `${what}: kv-tile ${j}'s first q-tile`);
    }
    if (square(h)) {
      // A square run's: as the pages computed them before.
      for (let i = 0; i < h.Tr; i++) {
        assert.strictEqual(lastKvTile(h, i), h.causal ? Math.floor((Math.min(h.N, (i + 1) * h.Br) - 1) / h.Bc) : h.Tc - 1, what);
      }
      for (let j = 0; j < h.Tc; j++) assert.strictEqual(firstQTile(h, j), h.causal ? Math.floor((j * h.Bc) / h.Br) : 0, what);
    }
  }
});

test('the tile grid draws the query rows and the shifted diagonal', (t) => {
  const rng = random(t);
  const { h } = named('tail-flash2');
  for (const size of [120, 333, 480, 720]) {
    const g = gridGeometry(h, size);
    // 30 rows of 42 to scale, to the pixel, where that gives each of the 8
    // q-tiles 24 pixels; at 120 wide, 24 a q-tile but no taller than wide.
    assert.strictEqual(g.width, size);
    assert.strictEqual(g.height, { 120: 120, 333: 238, 480: 343, 720: 514 }[size]);
    assert.strictEqual(g.px, size / 42);
    assert.strictEqual(g.py, g.height / 30);
    // The diagonal runs from query row 0's first masked key (position 12)
    // to the bottom right corner.
    assert.deepEqual(g.diagonal, [12 * size / 42, 0, size, g.height]);
    const [x0, y0, x1, y1] = g.diagonal;
    const lineX = (y) => x0 + (x1 - x0) * (y - y0) / (y1 - y0);
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        const [x, y, w, hh] = tileRect(h, g, i, j);
        assert.ok(x >= 0 && y >= 0 && x + w <= size + 1e-9 && y + hh <= g.height + 1e-9, `tile (${i}, ${j}) inside the grid`);
        // A masked tile lies wholly right of the line (its left edge at or
        // past where the line crosses its bottom); any other reaches left
        // of it.
        const right = x >= lineX(y + hh) - 1e-9;
        assert.strictEqual(right, masked(h, i, j), `size ${size}: tile (${i}, ${j}) at ${[x, y, w, hh]}`);
      }
    }
  }
  // One query (a decode's) over many keys: a strip, not a hairline.
  const decode = { N: 4096, Nq: 1, Br: 16, Bc: 64, causal: true, Tr: 1, Tc: 64 };
  const g = gridGeometry(decode, 480);
  assert.strictEqual(g.height, 24);
  assert.deepEqual(tileRect(decode, g, 0, 63), [63 * 64 * 480 / 4096, 0, 64 * 480 / 4096, 24]);
  assert.strictEqual(g.diagonal[0], 4095 * 480 / 4096);
  // Never taller than wide, whatever the shape.
  for (let n = 0; n < 200; n++) {
    const N = 1 + rng.int(5000), Nq = 1 + rng.int(N), Br = 1 + rng.int(128);
    const s = gridGeometry({ N, Nq, Br, Tr: Math.ceil(Nq / Br) }, 120 + rng.int(600));
    assert.ok(s.height >= 1 && s.height <= s.width && Number.isInteger(s.height), `N ${N}, Nq ${Nq}, Br ${Br}: ${s.height} of ${s.width}`);
  }
});

test('a square run\'s grid, words and bytes are as they were', (t) => {
  const rng = random(t);
  for (const { name, m, h } of squares) {
    assert.ok(square(h) && queryOffset(h) === 0, name);
    // The grid: square, a key's and a row's pixels one size, the corner to
    // corner diagonal, each tile where the page drew it before.
    for (const size of [120, 440, 720, 120 + rng.int(600)]) {
      const g = gridGeometry(h, size);
      assert.deepEqual(g, { width: size, height: size, px: size / h.N, py: size / h.N, diagonal: [0, 0, size, size] }, `${name} at ${size}`);
      const px = size / h.N;
      for (let i = 0; i < h.Tr; i++) {
        for (let j = 0; j < h.Tc; j++) {
          assert.deepEqual(tileRect(h, g, i, j), [j * h.Bc * px, i * h.Br * px, Math.min(h.Bc, h.N - j * h.Bc) * px, Math.min(h.Br, h.N - i * h.Br) * px], `${name}: tile (${i}, ${j})`);
        }
      }
    }
    // The words.
    assert.strictEqual(scoresShape(h), 'N×N');
    assert.strictEqual(scoresCount(h), 'N²');
    assert.strictEqual(shapeNote(h), '', name);
    for (let i = 0; i < h.Tr; i++) assert.strictEqual(rowsRange(h, i), `${i * h.Br}–${Math.min(h.N, (i + 1) * h.Br) - 1}`);
    for (let j = 0; j < h.Tc; j++) assert.strictEqual(keysRange(h, j), `${j * h.Bc}–${Math.min(h.N, (j + 1) * h.Bc) - 1}`);
    for (const r of m.steps) {
      const said = describe(h, r).join(' ');
      assert.ok(!said.includes('Nq'), `${name}: ${said}`);
      if (r.kind === 'scores' && h.variant === 'naive') assert.ok(said.includes('an N×N buffer'), said);
    }
    // The bytes, as compare.js and compare_memory.js counted them.
    const bh = h.batch * h.heads, nn = bh * h.N * h.N;
    for (const backward of [false, true]) {
      const before = backward
        ? (materialises(h.variant) ? `P, dP and dS: 3 × ${fmtBytes(nn * 4)} in device memory`
          : `none N×N: D (${fmtBytes(bh * h.N * 4)}) beyond the inputs and gradients; S, P, dP and dS tiles: ${fmtBytes(4 * h.Br * h.Bc * 4)} on chip per block`)
        : materialises(h.variant)
          ? `S and P: ${fmtBytes(nn * 4)} + ${fmtBytes(nn * (h.dtype === 'bf16' ? 2 : 4))} in device memory`
          : `none beyond Q, K, V, O; S and P tiles: ${fmtBytes(2 * h.Br * h.Bc * 4)} on chip per block`;
      assert.strictEqual(largestBuffer(h, backward), before, `${name} (backward ${backward})`);
      const labels = materialises(h.variant)
        ? (backward ? ['P', 'dP', 'dS'] : ['S', 'P']).map((n) => ({ name: n, label: `${n} ${fmtBytes(h.N * h.N * (n === 'P' && h.dtype === 'bf16' ? 2 : 4))}` }))
        : [];
      assert.deepEqual(squareLabels(h, backward), labels, `${name} (backward ${backward})`);
    }
  }
});

test('the memory panel counts Q and O by query heads, K and V by heads of K and V', () => {
  // shapes: N 37, Nq 21, d 4, 1 batch of 4 heads over 2, float32.
  const s = named('shapes').h;
  assert.deepEqual(runBytes(s), {
    q: 4 * 21 * 4 * 4, k: 2 * 37 * 4 * 4, v: 2 * 37 * 4 * 4, o: 4 * 21 * 4 * 4, s: 4 * 21 * 37 * 4, p: 4 * 21 * 37 * 4, rows: 4 * 21 * 4,
  });
  assert.deepEqual(headBytes(s), { q: 21 * 16, k: 37 * 16, v: 37 * 16, o: 21 * 16, s: 21 * 37 * 4, p: 21 * 37 * 4, rows: 21 * 4 });
  // K and V are not counted per query head: that would be twice as much.
  assert.notStrictEqual(runBytes(s).k, runBytes({ ...s, kvHeads: s.heads }).k);
  assert.strictEqual(runBytes({ ...s, kvHeads: s.heads }).k, 2 * runBytes(s).k);
  // In bf16 Q, K, V, O and P take 2 bytes an element; S stays float32.
  assert.deepEqual(runBytes({ ...s, dtype: 'bf16' }), {
    q: 4 * 21 * 4 * 2, k: 2 * 37 * 4 * 2, v: 2 * 37 * 4 * 2, o: 4 * 21 * 4 * 2, s: 4 * 21 * 37 * 4, p: 4 * 21 * 37 * 2, rows: 4 * 21 * 4,
  });
  const note = shapeNote(s);
  assert.strictEqual(note, `Q and O take ${fmtBytes(2 * 1344)} (Nq×d (Nq = 21) for each of 4 query heads); ` +
    `K and V take ${fmtBytes(2 * 1184)} (N×d, N = 37, for each of 2 K/V heads, each read by its group of 2 query heads). ` +
    `The least a kernel can move, reading Q, K and V once and writing O once: ${fmtBytes(2 * 1344 + 2 * 1184)}.`);
  // A decode: 1 query of 4096 positions, 32 heads over 8, d 128, bf16.
  const decode = { N: 4096, Nq: 1, D: 128, batch: 1, heads: 32, kvHeads: 8, dtype: 'bf16', Br: 16, Bc: 64 };
  const b = runBytes(decode);
  assert.strictEqual(b.k + b.v, 2 * 8 * 4096 * 128 * 2); // 16 MiB of cache
  assert.strictEqual(b.q + b.o, 2 * 32 * 128 * 2);
  assert.ok(shapeNote(decode).includes('16.0 MiB') && shapeNote(decode).includes('group of 4 query heads'), shapeNote(decode));

  // tail-naive: S and P are 30×42 for each of the 2 query heads.
  const n = named('tail-naive').h;
  assert.strictEqual(largestBuffer(n, false), `S and P: ${fmtBytes(2 * 30 * 42 * 4)} + ${fmtBytes(2 * 30 * 42 * 4)} in device memory`);
  assert.deepEqual(squareLabels(n, false), [{ name: 'S', label: `S ${fmtBytes(30 * 42 * 4)}` }, { name: 'P', label: `P ${fmtBytes(30 * 42 * 4)}` }]);
  assert.strictEqual(largestBuffer(n, true), `P, dP and dS: 3 × ${fmtBytes(2 * 30 * 42 * 4)} in device memory`);
  const f = named('tail-flash2').h;
  assert.strictEqual(largestBuffer(f, true), `none Nq×N: D (${fmtBytes(2 * 30 * 4)}) beyond the inputs and gradients; S, P, dP and dS tiles: ${fmtBytes(4 * 4 * 8 * 4)} on chip per block`);
  assert.strictEqual(largestBuffer(f, false), `none beyond Q, K, V, O; S and P tiles: ${fmtBytes(2 * 4 * 8 * 4)} on chip per block`);
  assert.deepEqual(squareLabels(f, false), []);
});

test('a run with fewer queries says Nq×N, names its rows\' positions, and counts its rows of Nq', () => {
  const { m, h } = named('tail-naive');
  assert.strictEqual(scoresShape(h), 'Nq×N');
  assert.strictEqual(scoresCount(h), 'Nq·N');
  let told = 0;
  for (const r of m.steps.filter((x) => x.kind === 'scores' || x.kind === 'softmax')) {
    const [title, body] = describe(h, r);
    assert.ok(body.includes('Nq×N buffer') && !body.includes('N×N'), body);
    // Rows are query rows 0–29: the last q-tile's are 28–29.
    if (r.i === h.Tr - 1 && r.kind === 'softmax') assert.ok(title.includes('rows 28–29'), title);
    told++;
  }
  assert.ok(told > 10);
  assert.strictEqual(rowsRange(h, 7), '28–29');
  assert.strictEqual(positionsRange(h, 7), '40–41');
  assert.strictEqual(positionsRange(h, 0), '12–15');
  // The grouped run's heads name the head of K and V they read.
  assert.ok(describe(h, m.steps[0])[0].endsWith('batch 0, head 0, K/V head 0'), describe(h, m.steps[0])[0]);
});
