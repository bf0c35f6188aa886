// Getting a trace into the page: over the websocket as the engine computes
// it, over plain HTTP when a network breaks websockets, or from a file.
import { TraceReader } from './trace.js';

// startRun streams the run named by query. handlers: onHeader(h),
// onRecord(r), onDone(info), onError(message, fields), onTransport(name).
// It returns {cancel()}.
export function startRun(query, handlers) {
  let reader = new TraceReader({ onHeader: handlers.onHeader, onRecord: handlers.onRecord });
  let finished = false;
  let fellBack = false;
  let abort = null;
  const finish = (fn, ...args) => { if (!finished) { finished = true; fn(...args); } };
  const fail = (msg, fields) => finish(handlers.onError, msg, fields);

  const overHTTP = async () => {
    fellBack = true;
    handlers.onTransport?.('HTTP (websocket unavailable)');
    reader = new TraceReader({ onHeader: handlers.onHeader, onRecord: handlers.onRecord });
    const ctl = new AbortController();
    abort = () => ctl.abort();
    try {
      const res = await fetch(`/api/trace?${query}`, { signal: ctl.signal });
      if (!res.ok) {
        const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
        return fail(body.error, body.fields);
      }
      const body = res.body.getReader();
      for (;;) {
        const { done, value } = await body.read();
        if (done) break;
        reader.push(value);
      }
      if (!reader.complete) return fail('the trace download ended early');
      finish(handlers.onDone, { records: reader.count, transport: 'http' });
    } catch (e) {
      if (e.name === 'AbortError') return finish(handlers.onDone, { cancelled: true });
      fail(String(e.message || e));
    }
  };

  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  let ws;
  try {
    ws = new WebSocket(`${proto}//${location.host}/ws/trace?${query}`);
  } catch {
    overHTTP();
    return { cancel: () => abort?.() };
  }
  ws.binaryType = 'arraybuffer';
  handlers.onTransport?.('websocket');
  ws.onmessage = (ev) => {
    if (typeof ev.data === 'string') {
      const msg = JSON.parse(ev.data);
      if (msg.type === 'done') {
        if (!reader.complete) return fail(`the stream ended after ${reader.count} of ${reader.header?.records} records`);
        finish(handlers.onDone, { records: reader.count, ms: msg.ms, transport: 'websocket' });
      } else if (msg.type === 'cancelled') finish(handlers.onDone, { cancelled: true, records: reader.count });
      else if (msg.type === 'error') fail(msg.error, msg.fields);
      return;
    }
    try {
      reader.push(ev.data);
    } catch (e) {
      fail(`bad trace data: ${e.message}`);
      ws.close(1008, 'bad trace data');
    }
  };
  ws.onclose = (ev) => {
    if (finished || fellBack) return;
    if (!reader.header && ev.code === 1006) return overHTTP(); // never connected
    if (ev.code === 1001) fail('The server is shutting down; run again in a moment.');
    else fail(`the connection closed (${ev.code}${ev.reason ? ': ' + ev.reason : ''}) after ${reader.count} records`);
  };
  abort = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'cancel' }));
  };
  return { cancel: () => abort?.() };
}

// readFile decodes a trace file the user chose, with the same decoder.
export async function readFile(file, handlers) {
  const reader = new TraceReader({ onHeader: handlers.onHeader, onRecord: handlers.onRecord });
  const buf = new Uint8Array(await file.arrayBuffer());
  reader.push(buf);
  if (!reader.complete) throw new Error(`the file holds ${reader.count} of ${reader.header?.records ?? '?'} records: it is cut short or not a trace`);
  return reader.count;
}
