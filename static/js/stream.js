// Getting a trace into the page: over the websocket as the engine computes
// it, over plain HTTP when a network breaks websockets, or from a file.
import { TraceReader } from './trace.js';

// startRun streams the run named by query. handlers: onHeader(h),
// onRecord(r), onDone(info), onError(message, fields), onTransport(name),
// onQueued(ahead): the run waits for the server, with ahead runs before it;
// ahead is -1 when, after a wait, it begins.
// It returns {cancel(), detach()}: cancel asks the server to stop and
// reports it; detach stops and silences every handler, for a page that has
// moved on to another run or a file.
export function startRun(query, handlers) {
  let detached = false;
  const call = (name, ...args) => { if (!detached) handlers[name]?.(...args); };
  const newReader = () => new TraceReader({ onHeader: (h) => call('onHeader', h), onRecord: (r) => call('onRecord', r) });
  let reader = newReader();
  let finished = false;
  let fellBack = false;
  let abort = null;
  const finish = (name, ...args) => { if (!finished) { finished = true; call(name, ...args); } };
  const fail = (msg, fields) => finish('onError', msg, fields);
  const busy = (why, seconds) => fail(`The server is busy and did not start this run: ${why}. Try again in ${seconds || 5} s.`);

  const overHTTP = async () => {
    fellBack = true;
    call('onTransport', 'HTTP (websocket unavailable)');
    reader = newReader();
    const ctl = new AbortController();
    abort = () => ctl.abort();
    try {
      const res = await fetch(`/api/trace?${query}`, { signal: ctl.signal });
      if (!res.ok) {
        const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
        if (res.status === 503) return busy(body.error.replace(/^busy: /, ''), res.headers.get('Retry-After'));
        return fail(body.error, body.fields);
      }
      const body = res.body.getReader();
      for (;;) {
        const { done, value } = await body.read();
        if (done) break;
        reader.push(value);
      }
      if (!reader.complete) return fail('the trace download ended early');
      finish('onDone', { records: reader.count, transport: 'http' });
    } catch (e) {
      if (e.name === 'AbortError') return finish('onDone', { cancelled: true });
      fail(String(e.message || e));
    }
  };

  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  let ws;
  try {
    ws = new WebSocket(`${proto}//${location.host}/ws/trace?${query}`);
  } catch {
    overHTTP();
    return { cancel: () => abort?.(), detach() { detached = true; abort?.(); } };
  }
  ws.binaryType = 'arraybuffer';
  call('onTransport', 'websocket');
  ws.onmessage = (ev) => {
    if (typeof ev.data === 'string') {
      const msg = JSON.parse(ev.data);
      if (msg.type === 'done') {
        if (!reader.complete) return fail(`the stream ended after ${reader.count} of ${reader.header?.records} records`);
        finish('onDone', { records: reader.count, ms: msg.ms, transport: 'websocket' });
      } else if (msg.type === 'queued') call('onQueued', msg.ahead);
      else if (msg.type === 'running') call('onQueued', -1);
      else if (msg.type === 'busy') busy(msg.error, msg.retry_after);
      else if (msg.type === 'cancelled') finish('onDone', { cancelled: true, records: reader.count });
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
    else if (ev.code === 1013) busy(ev.reason.replace(/^busy: /, '') || 'it has as many runs as it takes', 5);
    else fail(`the connection closed (${ev.code}${ev.reason ? ': ' + ev.reason : ''}) after ${reader.count} records`);
  };
  abort = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'cancel' }));
  };
  return {
    cancel: () => abort?.(),
    detach() {
      detached = true;
      if (fellBack) abort?.();
      else if (ws.readyState <= WebSocket.OPEN) ws.close(1000, 'the page moved on');
    },
  };
}

// readFile decodes a trace file the user chose, with the same decoder. A
// file larger than maxBytes (the largest trace a run makes) is refused
// before a byte of it is read.
export async function readFile(file, handlers, maxBytes) {
  if (maxBytes && file.size > maxBytes) {
    throw new Error(`it is ${(file.size / 2 ** 20).toFixed(1)} MiB, and a trace is at most ${(maxBytes / 2 ** 20).toFixed(1)} MiB: it is not a trace of this app`);
  }
  const reader = new TraceReader({ onHeader: handlers.onHeader, onRecord: handlers.onRecord });
  const buf = new Uint8Array(await file.arrayBuffer());
  reader.push(buf);
  if (!reader.complete) throw new Error(`the file holds ${reader.count} of ${reader.header?.records ?? '?'} records: it is cut short or not a trace`);
  return reader.count;
}
