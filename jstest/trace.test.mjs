// The page's trace decoder (static/js/trace.js, with the layout
// trace_abi.js generates from package instrument) against traces the Go
// encoder wrote: every field of every header and record and every element
// of every array, however the bytes arrive; and every trace Go's decoder
// refuses, refused.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TraceReader, TraceError, decodeHeader, decodeRecord } from '../static/js/trace.js';
import { bytesOf, fixture, random, sameFloat32 } from './helpers.mjs';

const index = fixture('traces/index.json');
const summaries = new Map();
const summaryOf = (name) => {
  if (!summaries.has(name)) summaries.set(name, fixture(`traces/${name}.json`));
  return summaries.get(name);
};

// The header's fields as the page names them: those the Go side wrote, and
// the ones the decoder works out from them.
const HEADER_KEYS = ['variant', 'dtype', 'source', 'pattern', 'causal', 'timing', 'roles', 'N', 'D', 'Br', 'Bc', 'batch', 'heads', 'Nq', 'kvHeads',
  'tracedBH', 'tracedQ', 'seed', 'scale', 'numSMs', 'timerTickNs', 'records', 'recordedUnix', 'label', 'bytes', 'version', 'Tr', 'Tc', 'dims'];

export function checkHeader(h, want, version, where) {
  assert.deepEqual(Object.keys(h).sort(), [...HEADER_KEYS].sort(), `${where}: the header's fields`);
  for (const k of ['variant', 'dtype', 'source', 'pattern', 'causal', 'timing', 'roles', 'N', 'D', 'Br', 'Bc', 'batch', 'heads', 'Nq', 'kvHeads',
    'seed', 'numSMs', 'records', 'recordedUnix', 'label', 'bytes', 'Tr', 'Tc']) {
    assert.strictEqual(h[k], want[k], `${where}: header ${k}`);
  }
  assert.deepEqual(h.tracedBH, want.tracedBH, `${where}: header tracedBH`);
  assert.deepEqual(h.tracedQ, want.tracedQ, `${where}: header tracedQ`);
  assert.ok(sameFloat32(h.scale, want.scaleBits), `${where}: header scale ${h.scale}`);
  assert.ok(sameFloat32(h.timerTickNs, want.timerTickNsBits), `${where}: header timerTickNs ${h.timerTickNs}`);
  assert.strictEqual(h.version, version, `${where}: header version`);
  assert.deepEqual(h.dims, { N: want.N, Nq: want.Nq, D: want.D, Br: want.Br, Bc: want.Bc }, `${where}: header dims`);
}

const RECORD_KEYS = ['kind', 'bh', 'i', 'j', 'rowsValid', 'colsValid', 'sm', 'bytesRead', 'bytesWritten', 'tStart', 'tEnd', 'size'];

export function checkRecord(r, want, where) {
  const arrays = want.arrays.map((a) => a.name);
  const roles = want.role ? ['role', 'event'] : [];
  assert.deepEqual(Object.keys(r).sort(), [...RECORD_KEYS, ...roles, ...arrays].sort(), `${where}: the record's fields`);
  for (const k of ['kind', 'bh', 'i', 'j', 'rowsValid', 'colsValid', 'sm', 'bytesRead', 'bytesWritten', 'size']) {
    assert.strictEqual(r[k], want[k], `${where}: ${k}`);
  }
  assert.strictEqual(r.tStart, BigInt(want.tStart), `${where}: tStart`);
  assert.strictEqual(r.tEnd, BigInt(want.tEnd), `${where}: tEnd`);
  if (want.role) {
    assert.strictEqual(r.role, want.role, `${where}: role`);
    assert.strictEqual(r.event, want.event, `${where}: event`);
  }
  for (const { name, bits } of want.arrays) {
    const a = r[name];
    assert.ok(a instanceof Float32Array, `${where}: ${name} is no Float32Array`);
    assert.strictEqual(a.length, bits.length, `${where}: ${name}'s length`);
    for (let e = 0; e < bits.length; e++) {
      if (!sameFloat32(a[e], bits[e])) assert.fail(`${where}: ${name}[${e}] is ${a[e]}, the Go side wrote bits ${bits[e].toString(16)}`);
    }
  }
}

// decode pushes pieces to a reader and checks what it decodes against the
// summary, record by record as they come.
function decode(pieces, entry) {
  const want = summaryOf(entry.summary);
  let header = null;
  let n = 0;
  const reader = new TraceReader({
    onHeader(h) {
      assert.strictEqual(header, null, `${entry.file}: a second header`);
      header = h;
      checkHeader(h, want.header, entry.version, entry.file);
    },
    onRecord(r) {
      assert.ok(header, `${entry.file}: a record before the header`);
      assert.ok(n < want.records.length, `${entry.file}: more records than the Go side wrote`);
      checkRecord(r, want.records[n], `${entry.file} record ${n}`);
      n++;
    },
  });
  for (const p of pieces) reader.push(p);
  assert.strictEqual(n, want.records.length, `${entry.file}: records decoded`);
  assert.ok(reader.complete, `${entry.file}: the reader does not call the trace complete`);
  return n;
}

test('every trace the Go encoder wrote decodes to the fields and elements it holds', () => {
  assert.ok(index.traces.length >= 10);
  let records = 0;
  for (const entry of index.traces) records += decode([bytesOf(`traces/${entry.file}.fstrace`)], entry);
  assert.ok(records > 400, `${records} records checked`);
});

// pieces cuts bytes at random places into Uint8Arrays and ArrayBuffers,
// some views at odd offsets of larger buffers, as websocket frames, fetch
// chunks and a worker's messages bring them.
function pieces(rng, bytes) {
  const out = [];
  for (let at = 0; at < bytes.length;) {
    const n = Math.min(bytes.length - at, rng.pick([1, 3, 7, 8, 56, 97, 1 + rng.int(4096)]));
    const chunk = bytes.subarray(at, at + n);
    const how = rng.int(3);
    if (how === 0) out.push(chunk.slice().buffer);
    else if (how === 1) {
      const pad = 1 + rng.int(7);
      const big = new Uint8Array(n + pad + 3);
      big.set(chunk, pad);
      out.push(big.subarray(pad, pad + n));
    } else out.push(chunk.slice());
    at += n;
  }
  return out;
}

test('decoding does not depend on how the bytes arrive', (t) => {
  const rng = random(t);
  for (let round = 0; round < 4; round++) {
    for (const entry of index.traces) decode(pieces(rng, bytesOf(`traces/${entry.file}.fstrace`)), entry);
  }
});

test('a record whose arrays lie at an unaligned offset reads the same', () => {
  for (const entry of index.traces) {
    const raw = bytesOf(`traces/${entry.file}.fstrace`);
    const want = summaryOf(entry.summary);
    // The same bytes one past an 8-byte boundary: the arrays cannot be
    // views, and are read element by element.
    const buf = new Uint8Array(raw.length + 1);
    buf.set(raw, 1);
    const shifted = buf.subarray(1);
    const h = decodeHeader(shifted);
    checkHeader(h, want.header, entry.version, `${entry.file} (unaligned)`);
    let off = h.bytes;
    for (let n = 0; n < want.records.length; n++) {
      const r = decodeRecord(h, shifted, off);
      checkRecord(r, want.records[n], `${entry.file} (unaligned) record ${n}`);
      off += r.size;
    }
    assert.strictEqual(off, raw.length);
  }
});

test('a header or record cut short asks for more bytes', () => {
  for (const entry of index.traces) {
    const raw = bytesOf(`traces/${entry.file}.fstrace`);
    const want = summaryOf(entry.summary);
    for (let n = 0; n < want.header.bytes; n += 13) assert.strictEqual(decodeHeader(raw.subarray(0, n)), null, `${entry.file}: a header of ${n} bytes`);
    const h = decodeHeader(raw);
    if (!want.records.length) continue;
    const size = want.records[0].size;
    for (const cut of [0, 1, 55, 56, size - 1]) {
      if (cut < 0 || cut >= size) continue;
      assert.strictEqual(decodeRecord(h, raw.subarray(0, h.bytes + cut), h.bytes), null, `${entry.file}: the first record cut at ${cut} bytes`);
    }
  }
});

test('every trace Go\'s decoder refuses, the page\'s refuses', (t) => {
  const rng = random(t);
  assert.ok(index.rejected.length >= 10);
  for (const bad of index.rejected) {
    const raw = bytesOf(`traces/${bad.file}.fstrace`);
    for (const split of [[raw], pieces(rng, raw)]) {
      const reader = new TraceReader({ onHeader() {}, onRecord() {} });
      let refused = null;
      try {
        for (const p of split) reader.push(p);
      } catch (e) {
        refused = e;
      }
      // A trace cut short is no error until it ends: the reader waits for
      // its last bytes and never calls it complete. Anything else is
      // refused as it is read.
      if (bad.file === 'rejected-cut') assert.ok(!refused && !reader.complete, `${bad.file}: ${refused ?? 'read as a whole trace'}`);
      else assert.ok(refused instanceof TraceError, `${bad.file} (${bad.why}; Go: ${bad.go}): ${refused ? `threw ${refused}, not a TraceError` : 'the page reads it'}`);
    }
  }
});
