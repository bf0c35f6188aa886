// Getting a trace into the page: over the websocket as the engine computes
// it, over plain HTTP when a network breaks websockets, or from a file.
// A run is fetched once per page: every widget of a lesson (its frames
// included) that shows the same run reads one stream, kept by the page's
// RunHub.
import { TraceReader } from './trace.js';
import { newDecoder } from './stream_decoder.js';
import { onSite, siteBytes } from './site.js';

// startRun streams the run named by query. handlers: onHeader(h),
// onRecord(r), onDone(info), onError(message, fields), onTransport(name),
// onQueued(ahead): the run waits for the server, with ahead runs before it;
// ahead is -1 when, after a wait, it begins.
// It returns {cancel(), detach()}: cancel asks the server to stop and
// reports it; detach stops and silences every handler, for a page that has
// moved on to another run or a file.
//
// The run comes from the hub of the top page when this page is framed by
// one of this site's pages that keeps a hub (a lesson), else from this
// page's own: a second caller of the same run, at once or later, is handed
// what the first stream brought (header, records, its end) and then what
// it still brings, without a request of its own.
export function startRun(query, handlers) {
  const run = runHub().open(query, handlers);
  // A frame that goes (navigated, removed) stops reading its runs from
  // the top page's hub.
  mine.add(run);
  return {
    cancel: () => run.cancel(),
    detach() { mine.delete(run); run.detach(); },
  };
}

const mine = new Set();
addEventListener('pagehide', (ev) => {
  if (ev.persisted) return; // kept for a return to this page
  for (const run of mine) run.detach();
  mine.clear();
});

// installRunHub gives this page a hub its frames share (a lesson calls it
// before its widgets load).
export function installRunHub() {
  return runHub();
}

const HUB = '__flashstepRuns';

function runHub() {
  try {
    const top = window.top;
    if (top !== window && top.location.origin === location.origin && top[HUB]) return top[HUB];
  } catch { /* a frame of another site: this page's own hub */ }
  window[HUB] ??= new RunHub();
  return window[HUB];
}

// KEEP_BYTES bounds the finished runs a hub keeps after their last reader
// has gone (a lesson's widget built later reads them again); past it the
// oldest are dropped, and would be fetched again.
const KEEP_BYTES = 48 << 20;

// SLICE_MS is how long the hub hands a run to its readers before it lets
// the page's main thread do other work: a widget's handlers (its model,
// its first drawing) take 20 to 50 ms each, and a page that built three
// widgets in one task could not answer a click for a fifth of a second.
const SLICE_MS = 30;

// RunHub: one stream per distinct run query, shared by every reader of the
// page. A run ended by an error or a cancel is forgotten once told, so
// that asking again fetches it again. Readers are told in slices of
// SLICE_MS, each reader in the order of its run.
class RunHub {
  constructor() {
    this.runs = new Map(); // query -> run, in the order last read
    this.due = new Set(); // readers with something still to be told
    this.pumping = false;
  }

  open(query, handlers) {
    let run = this.runs.get(query);
    if (!run) {
      run = { query, header: null, records: [], bytes: 0, transport: null, ahead: undefined, end: null, readers: new Set(), upstream: null };
      this.runs.set(query, run);
      run.upstream = openStream(query, {
        onTransport: (name) => { run.transport = name; this.tell(run, (r) => r.call('onTransport', name)); },
        onQueued: (ahead) => { run.ahead = ahead; this.tell(run, (r) => r.call('onQueued', ahead)); },
        onHeader: (h) => { run.header = h; this.tell(run); },
        onRecords: (list) => {
          for (const rec of list) { run.records.push(rec); run.bytes += rec.size; }
          this.tell(run);
        },
        onDone: (info) => this.end(run, 'onDone', [info]),
        onError: (msg, fields) => this.end(run, 'onError', [msg, fields]),
      });
    } else {
      // Read last: the last to be dropped.
      this.runs.delete(query);
      this.runs.set(query, run);
    }
    const reader = {
      run, handlers, greeted: false, headerSent: false, sent: 0, ended: false, detached: false,
      call(name, ...args) {
        if (this.detached) return;
        try { this.handlers[name]?.(...args); } catch (e) { reportError(e); }
      },
    };
    run.readers.add(reader);
    // What the run has brought so far reaches the new reader after open
    // returns, as a fresh stream's would; then it follows the run.
    this.wake(reader);
    const leave = () => {
      reader.detached = true;
      this.due.delete(reader);
      run.readers.delete(reader);
      if (!run.end && run.readers.size === 0) {
        // No one reads it any more: stop the stream, forget the run.
        this.forget(run);
        run.upstream.detach();
      }
      this.trim();
    };
    return {
      cancel: () => {
        if (reader.detached || reader.ended) return;
        if (!run.end && run.readers.size === 1) {
          run.upstream.cancel(); // the server says it stopped; the end is told
          return;
        }
        // Others still read the run: this reader alone stops.
        reader.ended = true;
        this.due.delete(reader);
        reader.call('onDone', { cancelled: true, records: reader.sent });
        leave();
      },
      detach: leave,
    };
  }

  // tell brings the readers of run up to date, or calls say(reader) for
  // each reader already greeted.
  tell(run, say) {
    for (const reader of run.readers) {
      if (say) { if (reader.greeted && !this.due.has(reader)) say(reader); else this.wake(reader); }
      else this.wake(reader);
    }
  }

  wake(reader) {
    this.due.add(reader);
    if (this.pumping) return;
    this.pumping = true;
    setTimeout(() => this.pump(), 0);
  }

  // pump tells the readers due what their runs have brought, for SLICE_MS
  // at most (one handler at least), then yields and goes on.
  pump() {
    const until = performance.now() + SLICE_MS;
    let first = true;
    const more = () => {
      if (first) { first = false; return true; }
      return performance.now() < until;
    };
    for (const reader of [...this.due]) {
      if (!this.catchUp(reader, more)) break;
      this.due.delete(reader);
    }
    if (this.due.size) setTimeout(() => this.pump(), 0);
    else this.pumping = false;
  }

  // catchUp tells reader what its run has that it has not been told, while
  // more() allows; it says whether the reader is up to date.
  catchUp(reader, more) {
    const run = reader.run;
    if (reader.detached) return true;
    if (!reader.greeted) {
      reader.greeted = true;
      if (run.transport) reader.call('onTransport', run.transport);
      if (!run.header && run.ahead !== undefined) reader.call('onQueued', run.ahead);
    }
    if (run.header && !reader.headerSent) {
      if (!more()) return false;
      reader.headerSent = true;
      reader.call('onHeader', run.header);
    }
    while (reader.sent < run.records.length) {
      if (reader.detached) return true;
      if (!more()) return false;
      reader.call('onRecord', run.records[reader.sent++]);
    }
    if (run.end && !reader.ended && !reader.detached) {
      if (!more()) return false;
      reader.ended = true;
      reader.call(run.end.name, ...run.end.args);
    }
    return true;
  }

  end(run, name, args) {
    run.end = { name, args };
    const whole = name === 'onDone' && !args[0]?.cancelled;
    if (!whole) this.forget(run);
    this.tell(run);
    this.trim();
  }

  forget(run) {
    if (this.runs.get(run.query) === run) this.runs.delete(run.query);
  }

  // trim drops the oldest finished runs no one reads past KEEP_BYTES.
  trim() {
    let kept = 0;
    for (const run of [...this.runs.values()].reverse()) {
      if (!run.end || run.readers.size > 0) continue;
      kept += run.bytes;
      if (kept > KEEP_BYTES) this.forget(run);
    }
  }
}

// openStream is one stream of a run from the server, with the handlers of
// startRun but records in batches: onRecords(list).
function openStream(query, handlers) {
  let detached = false;
  let finished = false;
  const call = (name, ...args) => { if (!detached && !finished) handlers[name]?.(...args); };
  let fellBack = false;
  let abort = null;
  let got = 0; // records decoded
  let total; // records the header promises
  const finish = (name, ...args) => {
    if (finished) return;
    finished = true;
    decoder.drop();
    if (!detached) handlers[name]?.(...args);
  };
  const fail = (msg, fields) => finish('onError', msg, fields);
  const busy = (why, seconds) => fail(`The server is busy and did not start this run: ${why}. Try again in ${seconds || 5} s.`);
  const newStreamDecoder = () => {
    got = 0;
    total = undefined;
    return newDecoder({
      header: (h) => { total = h.records; call('onHeader', h); },
      records: (list) => { got += list.length; call('onRecords', list); },
      error: (msg) => {
        fail(`bad trace data: ${msg}`);
        if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1008, 'bad trace data');
        abort?.();
      },
    });
  };
  let decoder = newStreamDecoder();
  let ws = null;

  // The static site has no server: the run comes from its recording or
  // the browser's WebAssembly (site.js), into the same decoder.
  if (onSite) {
    const run = siteBytes(query, { onChunk: (c) => decoder.push(c), onTransport: (name) => call('onTransport', name) });
    run.done.then(async () => {
      const end = await decoder.end();
      if (!end.complete) return fail(`the trace ended after ${end.count} of ${end.total ?? total} records`);
      finish('onDone', { records: end.count, transport: 'site' });
    }, (e) => (run.stopped ? finish('onDone', { cancelled: true, records: got }) : fail(e.message, e.body?.fields)));
    return { cancel: () => run.cancel(), detach() { detached = true; run.cancel(); decoder.drop(); } };
  }

  const overHTTP = async () => {
    fellBack = true;
    call('onTransport', 'HTTP (websocket unavailable)');
    decoder.drop();
    decoder = newStreamDecoder();
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
        decoder.push(value);
      }
      const end = await decoder.end();
      if (!end.complete) return fail('the trace download ended early');
      finish('onDone', { records: end.count, transport: 'http' });
    } catch (e) {
      if (e.name === 'AbortError') return finish('onDone', { cancelled: true, records: got });
      fail(String(e.message || e));
    }
  };

  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  try {
    ws = new WebSocket(`${proto}//${location.host}/ws/trace?${query}`);
  } catch {
    ws = null;
    overHTTP();
    return { cancel: () => abort?.(), detach() { detached = true; abort?.(); decoder.drop(); } };
  }
  ws.binaryType = 'arraybuffer';
  call('onTransport', 'websocket');
  let bytes = 0; // binary frames received
  let doneSeen = false; // the server said done: the end is told once every byte is decoded
  ws.onmessage = (ev) => {
    if (finished) return;
    if (typeof ev.data === 'string') {
      const msg = JSON.parse(ev.data);
      if (msg.type === 'done') {
        doneSeen = true;
        decoder.end().then((end) => {
          if (!end.complete) return fail(`the stream ended after ${end.count} of ${end.total ?? total} records`);
          finish('onDone', { records: end.count, ms: msg.ms, transport: 'websocket' });
        });
      } else if (msg.type === 'queued') call('onQueued', msg.ahead);
      else if (msg.type === 'running') call('onQueued', -1);
      else if (msg.type === 'busy') busy(msg.error, msg.retry_after);
      else if (msg.type === 'cancelled') finish('onDone', { cancelled: true, records: got });
      else if (msg.type === 'error') fail(msg.error, msg.fields);
      return;
    }
    bytes++;
    decoder.push(ev.data);
  };
  ws.onclose = (ev) => {
    if (finished || fellBack || doneSeen) return;
    if (!bytes && ev.code === 1006) return overHTTP(); // never connected
    if (ev.code === 1001) fail('The server is shutting down; run again in a moment.');
    else if (ev.code === 1013) busy(ev.reason.replace(/^busy: /, '') || 'it has as many runs as it takes', 5);
    else fail(`the connection closed (${ev.code}${ev.reason ? ': ' + ev.reason : ''}) after ${got} records`);
  };
  abort = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'cancel' }));
  };
  return {
    cancel: () => abort?.(),
    detach() {
      detached = true;
      decoder.drop();
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
