// A paged cache's block table (static/js/pages.js): every table held to
// kernels.PageTable (pages.json, written by the Go side), seeds past a
// double's integers included; the rungs the registry marks paged.
import test from 'node:test';
import assert from 'node:assert/strict';
import { batchRowOf, kvHeadOf, pageOf, pageTable, paged, poolPages } from '../static/js/pages.js';
import { fixture, useRungs } from './helpers.mjs';

useRungs();

test('the block tables are kernels.PageTable\'s', () => {
  const cases = fixture('pages.json');
  assert.ok(cases.length > 80);
  for (const c of cases) {
    const h = { batch: c.batch, Tc: c.Tc, seed: c.seed };
    assert.strictEqual(poolPages(h), c.table.length, JSON.stringify({ ...c, table: undefined }));
    const got = Array.from({ length: c.batch }, (_, b) => pageTable(h, b)).flat();
    assert.deepEqual(got, c.table, `batch ${c.batch}, Tc ${c.Tc}, seed ${c.seed}`);
  }
  // The largest seed, reduced exactly: 2^64 − 1 mod 8 pages is 7.
  assert.strictEqual(pageOf({ batch: 1, Tc: 8, seed: '18446744073709551615' }, 0, 0), 7);
});

test('only the paged rung reads through a table', () => {
  assert.ok(paged({ variant: 'decode_paged' }));
  for (const variant of ['decode_split', 'decode_group', 'flash2']) assert.ok(!paged({ variant }), variant);
});

test('a batch-head\'s batch row and K/V head', () => {
  const h = { heads: 8, kvHeads: 2 };
  assert.deepEqual([0, 3, 4, 7, 8, 13].map((bh) => [batchRowOf(h, bh), kvHeadOf(h, bh)]), [[0, 0], [0, 0], [0, 1], [0, 1], [1, 0], [1, 1]]);
});
