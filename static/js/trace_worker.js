// The trace decoder, off the page's main thread: a module worker that
// turns the bytes of each stream (websocket frames, download chunks, in
// order) into its header and records, with trace.js, and posts them back
// in batches. A roles trace holds 16384 records: decoded on the main
// thread as they arrived, they held it for a tenth of a second.
//
// The page sends {type: 'push', id, chunk} for each piece of stream id,
// {type: 'end', id} when the stream has ended and {type: 'drop', id} when
// the page no longer wants it. The worker answers {type: 'header', id, h},
// {type: 'records', id, records}, {type: 'error', id, message} (the bytes
// are no trace; later pushes of that id are ignored) and, to an end,
// {type: 'end', id, complete, count, total}.
import { TraceReader } from './trace.js';

// BATCH is the most records one message carries: a message is read on the
// page's main thread in one task, and rebuilding its records there (objects
// and their arrays, cloned) took 55 to 130 ms a message of 2048 on a lesson
// whose frames stream as it loads.
const BATCH = 256;

const streams = new Map(); // id -> { reader, batch, failed }

function streamOf(id) {
  let s = streams.get(id);
  if (!s) {
    s = { batch: [], failed: false, reader: null };
    s.reader = new TraceReader({
      onHeader: (h) => self.postMessage({ type: 'header', id, h }),
      onRecord: (r) => {
        s.batch.push(r);
        if (s.batch.length >= BATCH) flush(id, s);
      },
    });
    streams.set(id, s);
  }
  return s;
}

function flush(id, s) {
  if (!s.batch.length) return;
  // The records' arrays are views of the bytes of this push: one copy of
  // them goes with the message.
  self.postMessage({ type: 'records', id, records: s.batch });
  s.batch = [];
}

self.onmessage = (ev) => {
  const { type, id } = ev.data || {};
  if (type === 'push') {
    const s = streamOf(id);
    if (s.failed) return;
    try {
      s.reader.push(ev.data.chunk);
    } catch (e) {
      s.failed = true;
      flush(id, s); // what came before the bad bytes, then the error
      self.postMessage({ type: 'error', id, message: String(e?.message || e) });
      return;
    }
    flush(id, s);
  } else if (type === 'end') {
    const s = streams.get(id);
    streams.delete(id);
    const r = s?.reader;
    self.postMessage({ type: 'end', id, complete: Boolean(r?.complete) && !s.failed, count: r?.count ?? 0, total: r?.header?.records });
  } else if (type === 'drop') {
    streams.delete(id);
  }
};
