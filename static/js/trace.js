// Decoding flashstep traces in the browser. The layout comes from
// trace_abi.js, which is generated from the Go definition in package
// instrument: this file knows no offsets of its own.
import {
  FORMAT_VERSION, MAGIC, NO_TILE, FLAG_CAUSAL, FLAG_TIMING, FLAG_ROLES, HEADER_WIRE_BYTES, RECORD_HEADER_BYTES,
  HEADER_FIELDS, RECORD_HEADER_FIELDS, KINDS, MIN_FORMAT_VERSION, VARIANTS, DTYPES, SOURCES, PATTERNS,
  ROLES, EVENTS, ROLE_EVENTS, TILE_EVENTS,
} from './trace_abi.js';

export { KINDS };

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function readField(dv, off, type, count) {
  const read = (o) => {
    switch (type) {
      case 'u8': return dv.getUint8(o);
      case 'u16': return dv.getUint16(o, true);
      case 'u32': return dv.getUint32(o, true);
      case 'u64': return dv.getBigUint64(o, true);
      case 'i64': return dv.getBigInt64(o, true);
      case 'f32': return dv.getFloat32(o, true);
    }
    throw new Error(`unknown wire type ${type}`);
  };
  const size = { u8: 1, u16: 2, u32: 4, u64: 8, i64: 8, f32: 4 }[type];
  if (count === 1) return read(off);
  return Array.from({ length: count }, (_, k) => read(off + k * size));
}

function readStruct(dv, base, fields) {
  const out = {};
  for (const [name, type, offset, count] of fields) out[name] = readField(dv, base + offset, type, count);
  return out;
}

const align8 = (n) => (n + 7) & ~7;

export class TraceError extends Error {}

// decodeHeader reads a header at bytes[0..]. It returns null when more bytes
// are needed.
export function decodeHeader(bytes) {
  if (bytes.length < HEADER_WIRE_BYTES) return null;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const w = readStruct(dv, 0, HEADER_FIELDS);
  const magic = String.fromCharCode(...w.magic);
  if (magic !== MAGIC) throw new TraceError('not a flashstep trace');
  if (w.version < MIN_FORMAT_VERSION || w.version > FORMAT_VERSION) throw new TraceError(`trace format version ${w.version}; this page reads versions ${MIN_FORMAT_VERSION} to ${FORMAT_VERSION}`);
  if (w.header_bytes !== align8(HEADER_WIRE_BYTES + w.label_bytes)) throw new TraceError('malformed trace header');
  if (bytes.length < w.header_bytes) return null;
  const label = new TextDecoder().decode(bytes.subarray(HEADER_WIRE_BYTES, HEADER_WIRE_BYTES + w.label_bytes));
  const h = {
    variant: VARIANTS[w.variant], dtype: DTYPES[w.dtype], source: SOURCES[w.source], pattern: PATTERNS[w.pattern],
    causal: (w.flags & FLAG_CAUSAL) !== 0,
    timing: (w.flags & FLAG_TIMING) !== 0,
    roles: (w.flags & FLAG_ROLES) !== 0,
    N: w.n, D: w.d, Br: w.br, Bc: w.bc, batch: w.batch, heads: w.heads,
    tracedBH: [w.trace_bh0, w.trace_bh1], tracedQ: [w.trace_q0, w.trace_q1],
    seed: w.seed.toString(), scale: w.scale, numSMs: w.num_sms, timerTickNs: w.timer_tick_ns,
    records: w.records, recordedUnix: Number(w.recorded_unix), label,
    bytes: w.header_bytes, version: w.version,
  };
  if (!h.variant || !h.source || !h.pattern || h.N < 1 || h.D < 1 || h.Br < 1 || h.Bc < 1) throw new TraceError('malformed trace header');
  // Version 4: the run's query rows (the last Nq of its N positions) and
  // its heads of K and V; earlier versions leave the bytes zero and mean N
  // and heads.
  if (w.version < 4 && (w.nq !== 0 || w.kv_heads !== 0)) throw new TraceError('malformed trace header');
  h.Nq = w.version >= 4 ? w.nq : h.N;
  h.kvHeads = w.version >= 4 ? w.kv_heads : h.heads;
  if (h.Nq < 1 || h.Nq > h.N || h.kvHeads < 1 || h.heads % h.kvHeads !== 0) throw new TraceError('malformed trace header');
  h.Tr = Math.ceil(h.Nq / h.Br);
  h.Tc = Math.ceil(h.N / h.Bc);
  h.dims = { N: h.N, Nq: h.Nq, D: h.D, Br: h.Br, Bc: h.Bc };
  return h;
}

// recordBytes is the wire size of a record of the given kind.
export function recordBytes(h, kind) {
  const spec = KINDS[kind];
  let n = 0;
  for (const [, shape] of spec.arrays) n += shape.reduce((p, d) => p * h.dims[d], 1);
  return align8(RECORD_HEADER_BYTES + 4 * n);
}

function floats(bytes, off, n) {
  const abs = bytes.byteOffset + off;
  if (littleEndian && abs % 4 === 0) return new Float32Array(bytes.buffer, abs, n);
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, abs, n * 4);
  for (let k = 0; k < n; k++) out[k] = dv.getFloat32(k * 4, true);
  return out;
}

// decodeRecord reads one record at bytes[off..]; null when more bytes are
// needed. Its arrays are Float32Array views named as in the ABI (m_old, o, ...).
export function decodeRecord(h, bytes, off) {
  if (bytes.length - off < RECORD_HEADER_BYTES) return null;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const w = readStruct(dv, off, RECORD_HEADER_FIELDS);
  const spec = KINDS[w.kind];
  if (!spec) throw new TraceError(`unknown record kind ${w.kind}`);
  if (spec.since > h.version) throw new TraceError(`a ${spec.name} record in a version-${h.version} trace`);
  const size = recordBytes(h, w.kind);
  if (bytes.length - off < size) return null;
  const r = {
    kind: spec.name, bh: w.bh, i: w.i === NO_TILE ? -1 : w.i, j: w.j === NO_TILE ? -1 : w.j,
    rowsValid: w.rows_valid, colsValid: w.cols_valid, sm: w.sm,
    bytesRead: Number(w.bytes_read), bytesWritten: Number(w.bytes_written),
    tStart: w.t_start, tEnd: w.t_end, size,
  };
  if (spec.name === 'role') {
    // A warp role's span (format version 3): which warpgroup, which event.
    r.role = ROLES[w.role];
    r.event = EVENTS[w.event];
    // As the Go decoder checks it: an event its role records, a kv-tile
    // exactly when the event is of one, no time running backwards.
    if (!h.roles || !r.role || !r.event || !ROLE_EVENTS[w.role].includes(w.event) ||
        TILE_EVENTS.includes(w.event) !== (r.j >= 0) || w.t_end < w.t_start || w.bytes_written !== 0n) {
      throw new TraceError('malformed role record');
    }
  } else if (w.role !== 0 || w.event !== 0) {
    throw new TraceError(`${spec.name} record with a role or event`);
  }
  if (r.bh < h.tracedBH[0] || r.bh >= h.tracedBH[1] || (spec.hasI && (r.i < h.tracedQ[0] || r.i >= h.tracedQ[1])) || (spec.hasJ && r.j >= h.Tc)) {
    throw new TraceError(`${spec.name} record outside the traced selection`);
  }
  let p = off + RECORD_HEADER_BYTES;
  for (const [name, shape] of spec.arrays) {
    const n = shape.reduce((acc, d) => acc * h.dims[d], 1);
    r[name] = floats(bytes, p, n);
    p += 4 * n;
  }
  return r;
}

// TraceReader turns a byte stream, in pieces of any size (websocket frames,
// fetch chunks, a file), into a header and records.
export class TraceReader {
  constructor({ onHeader, onRecord }) {
    this.onHeader = onHeader;
    this.onRecord = onRecord;
    this.header = null;
    this.pending = new Uint8Array(0);
    this.count = 0;
  }

  push(chunk) {
    let bytes = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
    if (this.pending.length) {
      const joined = new Uint8Array(this.pending.length + bytes.length);
      joined.set(this.pending);
      joined.set(bytes, this.pending.length);
      bytes = joined;
    } else if (bytes.byteOffset % 8 !== 0) {
      bytes = bytes.slice();
    }
    let off = 0;
    if (!this.header) {
      const h = decodeHeader(bytes);
      if (!h) { this.pending = bytes.slice(); return; }
      this.header = h;
      off = h.bytes;
      this.onHeader(h);
    }
    while (off < bytes.length) {
      if (this.count >= this.header.records) throw new TraceError('bytes after the last record');
      const r = decodeRecord(this.header, bytes, off);
      if (!r) break;
      off += r.size;
      this.count++;
      this.onRecord(r);
    }
    // Keep the undecoded tail; copy so decoded views stay valid and aligned.
    this.pending = off < bytes.length ? bytes.slice(off) : new Uint8Array(0);
  }

  get complete() { return this.header !== null && this.count === this.header.records && this.pending.length === 0; }
}
