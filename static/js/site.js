// The static site (make site): pages no server answers. onSite says
// whether this page is one; apiFetch stands in for fetch of this
// server's paths, answering on the site from the browser's WebAssembly
// (site_worker.js), the site's data files and its recordings, and
// passing through to the server otherwise; siteURL names a path of the
// site under its base ("/" or "/flashstep/").
export const onSite = typeof document !== 'undefined' && document.body?.hasAttribute('data-site');
export const base = (typeof document !== 'undefined' && document.querySelector('meta[name="fs-base"]')?.content) || '/';

// siteURL is path ("/step?…", "/static/js/x.js") as this page must ask
// for it: on the site, under its base, and a page's path with the slash
// of its folder (the site's /step is step/index.html; a static host
// would answer /step?… with a redirect, which some drop the query of).
export function siteURL(path) {
  if (!onSite || !path.startsWith('/')) return path;
  const [p, q] = path.split(/(?=[?#])/, 2);
  const page = !p.endsWith('/') && !/\.[a-z0-9]+$/i.test(p.split('/').pop());
  return base + p.slice(1) + (page ? '/' : '') + (q ?? '');
}

let worker = null;
const pending = new Map(); // call id -> {resolve, reject, onChunk}
let nextID = 1;

function siteWorker() {
  if (worker) return worker;
  worker = new Worker(`${base}static/js/site_worker.js?base=${encodeURIComponent(base)}`);
  // A worker that dies (its scripts did not load, the WebAssembly
  // failed) settles every call it had, and the next call starts another.
  worker.onerror = (ev) => {
    ev.preventDefault?.();
    const why = JSON.stringify({ error: `the site's WebAssembly worker stopped: ${ev.message || 'it did not start'}` });
    for (const call of pending.values()) call.reject(new SiteError(why));
    pending.clear();
    worker.terminate();
    worker = null;
  };
  worker.onmessage = ({ data }) => {
    const call = pending.get(data.id);
    if (!call) return;
    if (data.chunk) { call.onChunk?.(data.chunk); return; }
    pending.delete(data.id);
    if (data.ok) call.resolve(data.value); else call.reject(new SiteError(data.error));
  };
  return worker;
}

// SiteError carries the server's API error JSON ({error, fields}).
export class SiteError extends Error {
  constructor(json) {
    let body;
    try { body = JSON.parse(json); } catch { body = { error: String(json) }; }
    super(body.error);
    this.body = body;
  }
}

// call runs op in the site's worker; onChunk gets each chunk of a trace.
// The promise has the call's id, which cancel takes.
export function call(op, args, onChunk) {
  const id = nextID++;
  const p = new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onChunk });
    siteWorker().postMessage({ id, op, args });
  });
  p.id = id;
  return p;
}

// siteData is one of the site's data files (data/NAME.json), fetched
// once: recordings (each recording by its run's canonical query) and
// steps (the stepper's state for every stepper link of the pages), which
// let a page open a recorded run without loading the WebAssembly.
const dataFiles = new Map();
export function siteData(name) {
  if (!dataFiles.has(name)) dataFiles.set(name, fetch(`${base}data/${name}.json`).then((r) => (r.ok ? r.json() : {})).catch(() => ({})));
  return dataFiles.get(name);
}

const cancelCall = (id) => siteWorker().postMessage({ id: 0, op: 'cancel', args: [id] });

// siteBytes brings a run's trace on the site, chunk by chunk, to
// onChunk: its recording, fetched from the site's files, or its mirror
// computed in the worker; onTransport says which. It returns {done, cancel}:
// done settles when every chunk is handed over (rejecting with the
// refusal, a SiteError, for a run only a server makes), and cancel stops
// the run, after which done rejects with stopped set.
export function siteBytes(query, { onChunk, onTransport }) {
  let stop = null;
  const out = { stopped: false, cancel() { out.stopped = true; stop?.(); } };
  out.done = (async () => {
    const name = (await siteData('recordings'))[query] ?? await call('recording', [query]);
    if (out.stopped) throw new Error('cancelled');
    if (name) {
      onTransport?.('a recording, from this site');
      const ctl = new AbortController();
      stop = () => ctl.abort();
      const res = await fetch(`${base}recordings/${name}.fstrace`, { signal: ctl.signal });
      if (!res.ok) throw new Error(`the recording ${name} did not load (${res.status})`);
      const body = res.body.getReader();
      for (;;) {
        const { done, value } = await body.read();
        if (done) break;
        onChunk(value);
      }
      return;
    }
    onTransport?.("this browser's CPU (WebAssembly)");
    const run = call('trace', [query], onChunk);
    stop = () => cancelCall(run.id);
    await run;
    if (out.stopped) throw new Error('cancelled');
  })();
  return out;
}

const json = (body, status = 200) => new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const refusal = (e) => json(e.body ?? { error: String(e.message ?? e) }, e.body?.fields ? 400 : 501);

// The read-only APIs whose answer depends on the query: the worker
// computes them. Fixed answers are data files of the site, and so is
// each kernel's source (data/source/VARIANT.json).
const computed = new Set(['/api/config', '/api/source', '/api/memory', '/api/traffic', '/api/loop']);
const data = { '/api/traffic/measured': 'data/traffic-measured.json', '/api/sdpa': 'data/sdpa.json', '/api/sweeps/recorded': 'data/sweeps-recorded.json' };

// apiFetch is fetch(url, init) for a path of this site's server.
export async function apiFetch(url, init) {
  if (!onSite) return fetch(url, init);
  const u = new URL(url, location.origin);
  const path = u.pathname;
  const query = u.search.slice(1);
  try {
    const variant = u.searchParams.get('variant');
    if (path === '/api/source' && /^[a-z0-9_]+$/.test(variant ?? '')) {
      const res = await fetch(`${base}data/source/${variant}.json`);
      if (res.ok) return res;
    }
    if (computed.has(path)) return json(await call('get', [path, query]));
    if (data[path]) return fetch(base + data[path], init);
    if (path === '/api/kernels') {
      const table = await (await fetch(`${base}data/kernels.json`)).json();
      // The server's key (templates.KernelsView), which the stepper reads.
      if (query) table.Launched = JSON.parse(await call('get', [path, query])).launched;
      return json(table);
    }
    const cp = path.match(/^\/api\/checkpoints\/([^/]+)\/([^/]+)$/);
    if (cp && init?.method === 'POST') {
      const body = JSON.parse(init.body);
      return json(await call('grade', [decodeURIComponent(cp[1]), decodeURIComponent(cp[2]), body.answer ?? '', !!body.reveal]));
    }
    if (path.startsWith('/lab/') || path.startsWith('/static/') || path.startsWith('/docs/')) return fetch(base + path.slice(1) + u.search, init);
  } catch (e) {
    return refusal(e);
  }
  return json({ error: `${path} needs a server: in a clone of the repository, make run` }, 501);
}

// fillForm fills a form as the server renders it from a URL (on the site
// the page is one file for every URL): each field's value, and each
// field's problem beside it.
export function fillForm(form, values, errors) {
  for (const [k, v] of Object.entries(values)) {
    const el = form?.elements[k];
    if (!el || el instanceof RadioNodeList) continue;
    if (el.type === 'checkbox') el.checked = v === '1';
    else el.value = v;
  }
  for (const el of form?.querySelectorAll('.field-error') || []) {
    el.textContent = errors[el.dataset.field] || '';
    el.closest('.field, .check')?.classList.toggle('invalid', !!errors[el.dataset.field]);
  }
}

// embedded makes the page a lesson's frame, as the server renders one
// (embed=1): no site chrome.
export function embedded() {
  document.body.classList.add('embedded');
  for (const el of document.querySelectorAll('body > header.topbar, body > .banner')) el.remove();
}
