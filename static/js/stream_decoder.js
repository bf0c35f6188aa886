// Decoding a stream's bytes into its trace, off the page's main thread
// where it can: each stream gets a decoder in the page's one decoding
// worker (trace_worker.js), or, where no worker starts, one here.
import { TraceReader } from './trace.js';

// A decoder turns one stream's bytes into its header and records:
// push(chunk) in order, then end(), which resolves with {complete, count,
// total} once every pushed byte is decoded; drop() forgets the stream.
// sink: header(h), records(list), error(message). The page's decoder runs
// in a worker (trace_worker.js); where no worker can start, here.
let worker = null; // the page's decoding worker, null until wanted, false if none
let nextID = 1;
const decoding = new Map(); // stream id -> { sink, ended }

function decodeWorker() {
  if (worker === null) {
    try {
      worker = new Worker(new URL('./trace_worker.js', import.meta.url), { type: 'module' });
      worker.onmessage = (ev) => {
        const d = decoding.get(ev.data.id);
        if (!d) return;
        const { type } = ev.data;
        if (type === 'header') d.sink.header(ev.data.h);
        else if (type === 'records') d.sink.records(ev.data.records);
        else if (type === 'error') d.sink.error(ev.data.message);
        else if (type === 'end') { decoding.delete(ev.data.id); d.ended?.(ev.data); }
      };
      // A worker that cannot start (no module workers, a policy): the
      // streams it had are decoded here again from their bytes.
      worker.onerror = (ev) => {
        ev.preventDefault?.();
        const was = [...decoding.values()];
        worker.terminate();
        worker = false;
        decoding.clear();
        for (const d of was) d.fallBack();
      };
    } catch {
      worker = false;
    }
  }
  return worker || null;
}

function inlineDecoder(sink) {
  const reader = new TraceReader({ onHeader: (h) => sink.header(h), onRecord: (r) => sink.records([r]) });
  let failed = false;
  return {
    push(chunk) {
      if (failed) return;
      try { reader.push(chunk); } catch (e) { failed = true; sink.error(String(e.message || e)); }
    },
    end: () => Promise.resolve({ complete: reader.complete && !failed, count: reader.count, total: reader.header?.records }),
    drop() {},
  };
}

export function newDecoder(sink) {
  const w = decodeWorker();
  if (!w) return inlineDecoder(sink);
  const id = nextID++;
  // Until the worker answers, the bytes are kept: a worker that fails to
  // start hands them to a decoder here.
  let kept = [];
  let local = null;
  let endWanted = null;
  const d = {
    sink,
    ended: null,
    fallBack() {
      local = inlineDecoder(sink);
      for (const c of kept) local.push(c);
      kept = null;
      if (endWanted) local.end().then(endWanted);
    },
  };
  const heard = () => { kept = null; };
  d.sink = {
    header: (h) => { heard(); sink.header(h); },
    records: (list) => { heard(); sink.records(list); },
    error: (msg) => { heard(); sink.error(msg); },
  };
  decoding.set(id, d);
  return {
    push(chunk) {
      if (local) return local.push(chunk);
      const buf = chunk instanceof ArrayBuffer ? chunk : chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.byteLength);
      if (kept) kept.push(buf.slice(0));
      worker.postMessage({ type: 'push', id, chunk: buf }, [buf]);
    },
    end() {
      if (local) return local.end();
      return new Promise((resolve) => {
        endWanted = resolve;
        d.ended = (info) => { kept = null; resolve(info); };
        worker.postMessage({ type: 'end', id });
      });
    },
    drop() {
      if (local) return;
      decoding.delete(id);
      worker?.postMessage({ type: 'drop', id });
    },
  };
}
