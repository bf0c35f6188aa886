// The stepper page: the run form with live validation, the run's stream, the
// step controls and the views of the current step.
import { startRun, readFile } from './stream.js';
import { TraceModel } from './model.js';
import { Heatmap, TileGrid, Timeline, fmt, fmtBytes, tex } from './views.js';
import { RoleLanes } from './role_lanes.js';
import { batchHead, batchHeadShort, describe, fill, materialises, sub } from './steps.js';
import { reportSize, waitsToBeWanted, whenWanted, wanted } from './embed.js';
import { Knowledge, taughtUpTo } from './taught.js';
import { rung } from './rungs.js';
import * as backward from './backward.js';
import { apiFetch, call, embedded, fillForm, onSite, siteData, siteURL } from './site.js';

const $ = (id) => document.getElementById(id);
const page = onSite && location.search ? await siteStepperPage() : JSON.parse($('page-data').textContent);

// siteStepperPage: on the static site the stepper is one page for every
// URL, so the worker reads the URL as the server does (api.Stepper) and
// the page is filled here as the server would have rendered it: the
// form, each field's problem, the views a lesson's frame asks for, and a
// frame without the site's chrome.
async function siteStepperPage() {
  const q = location.search.slice(1);
  let st;
  try {
    st = (await siteData('steps'))[q] ?? JSON.parse(await call('get', ['/step', q]));
  } catch (e) {
    document.getElementById('run-status').textContent = `This page could not read its run: ${e.message}`;
    return { valid: false, query: '', step: 0, panels: [], embed: false };
  }
  fillForm(document.getElementById('run-form'), st.values, st.errors);
  document.getElementById('run-summary').textContent = st.summary;
  document.getElementById('estimate').textContent = st.estimate;
  document.getElementById('runs-on').textContent = st.runs_on;
  document.getElementById('run-settings').open = !st.data.valid;
  if (!st.data.valid) document.getElementById('run-status').textContent = 'Fix the highlighted fields to run.';
  const shown = st.data.panels || [];
  for (const el of document.querySelectorAll('[data-panel]')) el.hidden = shown.length > 0 && !shown.includes(el.dataset.panel);
  const figures = document.getElementById('kernel-figures');
  if (figures) figures.hidden = shown.length > 0 && !shown.includes('source');
  if (st.data.embed) {
    embedded();
    document.getElementById('stepper-page')?.classList.add('embed');
  }
  return st.data;
}
const form = $('run-form');

// What the reader knows: a lesson's frame says how far its course has gone
// (taught=N); the stepper's own page knows everything.
const know = new Knowledge(taughtUpTo(location.search));

// held are the numbers a lesson's checkpoint asks the student to predict
// (hold=bh.row.step,…: row's online softmax from that step on): shown as
// "?" until the lesson says the checkpoint is answered (flashstep-release),
// so that the step that holds the inputs of a prediction does not print
// its answer beside them.
const held = new Map();
// heldRoles are a roles run's held steps (hold=roles.bh.q.step): the lanes'
// note keeps back the softmax's overlap at that step of block (bh, q).
const heldRoles = new Set();
for (const part of (new URLSearchParams(location.search).get('hold') || '').split(',')) {
  if (part.startsWith('roles.')) {
    const [bh, q, step] = part.slice(6).split('.').map(Number);
    if ([bh, q, step].every(Number.isInteger)) heldRoles.add(`${bh}.${q}.${step}`);
    continue;
  }
  const [bh, row, step] = part.split('.').map(Number);
  if ([bh, row, step].every(Number.isInteger)) {
    const key = `${bh}.${row}`;
    held.set(key, Math.min(held.get(key) ?? Infinity, step));
  }
}

// holds says which of a row's numbers are held at the step shown: none
// before the step asked about; the new max, α and l at it, and at a row's
// first kv-tile (m_old = −∞) the tile's largest score and Σp too, which
// there are m_new and l themselves; everything after it (m_old then is the
// answer).
function holds(r, row) {
  const from = held.get(`${r.bh}.${row}`);
  const at = state.k + 1;
  if (from === undefined || at < from) return null;
  if (at > from) return new Set(['m-old', 'm-new', 'alpha', 'l', 'lse']);
  const first = r.m_old?.[row - r.i * state.model.h.Br] === -Infinity;
  return new Set(['m-new', 'alpha', 'l', ...(first ? ['tile-max', 'sum-p'] : [])]);
}

// digits=N (a lesson's widget may ask for it) prints the S, P and O
// tiles' values with up to N significant digits where they fit, for a
// checkpoint whose arithmetic needs more than the usual three.
const digits = Math.min(7, Math.max(3, Number(new URLSearchParams(location.search).get('digits')) || 3));

const views = {
  grid: new TileGrid($('grid'), $('grid-legend'), (i, j) => jumpToTile(i, j), know),
  s: new Heatmap($('s-tile'), { fit: true, labels: true, digits }),
  p: new Heatmap($('p-tile'), { fit: true, labels: true, digits }),
  o: new Heatmap($('o-tile'), { fit: true, labels: true, digits }),
  final: new Heatmap($('o-final'), { maxWidth: 520, maxHeight: 320, labels: true }),
  timeline: new Timeline($('timeline'), $('timeline-note'), (k) => { pause(); go(k); }),
  roles: new RoleLanes($('roles'), $('roles-note'), $('roles-legend'), $('roles-title'), (k) => { pause(); go(k); },
    (bh, q, step) => heldRoles.has(`${bh}.${q}.${step}`)),
};

// The role tables of the rungs that record warp roles (kernels.RoleTable,
// by rung): how many role records follow each kv-tile's timing record and
// the epilogue's, so that a roles trace's steps are counted from its header.
const roleTables = JSON.parse($('fs-role-tables')?.textContent || '{}');

const state = {
  model: null,
  k: -1, // the step shown, counted from 0 here; the page and the URL count from 1
  want: 0, // the step the URL asked for (from 0), shown once it arrives
  query: page.query,
  run: null,
  timer: null,
  t0: 0,
  firstDrawn: false,
  transport: '',
};

function setStatus(text, error = false) {
  const el = $('run-status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

// ---- the form ----

// formQuery is the form as a run's URL query. A blank size field is sent
// blank, so the server says it is required instead of quietly using the
// default; a blank traced range means all of it.
function formQuery() {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(form)) {
    if (typeof v !== 'string') continue;
    const t = v.trim();
    const el = form.elements[k];
    const required = el?.dataset.min !== undefined || el?.dataset.required !== undefined;
    if (required || (t !== '' && t !== 'all')) q.set(k, t);
  }
  if (!q.has('causal')) q.set('causal', '0');
  return q.toString();
}

function showFieldErrors(fields) {
  const byField = {};
  for (const f of fields || []) byField[f.field] = f.message;
  for (const el of form.querySelectorAll('.field-error')) {
    const msg = byField[el.dataset.field] || '';
    el.textContent = msg;
    el.closest('.field, .check')?.classList.toggle('invalid', msg !== '');
  }
  const selection = form.querySelector('details.selection');
  if (selection && (byField.trace_bh || byField.trace_q)) selection.open = true;
}

let checkSeq = 0;
async function checkForm() {
  const seq = ++checkSeq;
  const q = formQuery();
  const res = await apiFetch(`/api/config?${q}`);
  const body = await res.json();
  if (seq !== checkSeq) return null; // a newer edit has been checked since
  if (!res.ok) {
    showFieldErrors(body.fields);
    $('estimate').textContent = '–';
    $('run').disabled = true;
    // What is on screen no longer matches the form: say so rather than
    // leave a finished run looking current.
    if (state.model) $('stepper').classList.add('stale');
    setStatus(`Fix the highlighted fields to run${state.model ? '; the views show the previous run' : ''}: ${(body.fields || []).map((f) => f.message).join('; ') || body.error}`, true);
    return null;
  }
  showFieldErrors([]);
  $('estimate').textContent = body.estimate;
  $('runs-on').textContent = body.runs_on;
  // The static site has no download link: its traces are recordings'
  // own files, or made in this browser.
  if (!onSite) $('download').href = `/api/trace?${body.query}`;
  $('run').disabled = false;
  if (body.query === state.query && state.model) {
    $('stepper').classList.remove('stale');
    if (state.finished) setStatus(state.finished);
  } else if (state.model) {
    $('stepper').classList.add('stale');
    setStatus('The form has changed: press Run to run it; the views show the previous run.');
  }
  return body;
}

// The compiled GPU tiles fill Br, Bc and d at once.
$('gpu-tiles').addEventListener('change', (ev) => {
  const v = ev.target.value;
  if (!v) return;
  const [variant, br, bc, d] = v.split(',');
  $('f-br').value = br;
  $('f-bc').value = bc;
  $('f-d').value = d;
  // Rungs compiled at the same tiles share an option whose value lists
  // them all (the float32 ones): keep the one chosen, or take the last.
  const shared = variant.split('|');
  $('f-variant').value = shared.includes($('f-variant').value) ? $('f-variant').value : shared[shared.length - 1];
  ev.target.value = '';
  form.dispatchEvent(new Event('input'));
});

let debounce = null;
form.addEventListener('input', (ev) => {
  // The file field is in the form, but a file is no edit of the run the
  // form names: checking the form then would put the previous run's
  // status back over the file's.
  if (ev.target.id === 'upload') return;
  clearTimeout(debounce);
  debounce = setTimeout(checkForm, 200);
});

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  clearTimeout(debounce);
  const ok = await checkForm();
  if (!ok) {
    // Nothing runs, and nothing of the previous run stays on screen as if
    // it were the answer to this form.
    stopRun();
    clearRun();
    $('run-settings').open = true;
    return;
  }
  history.pushState(null, '', `${pagePath()}?${ok.query}`);
  $('run-summary').textContent = ok.summary;
  $('run-settings').open = false;
  begin(ok.query, 0);
});

// clearRun takes the previous run off the screen.
function clearRun() {
  state.model = null;
  state.k = -1;
  state.query = '';
  state.finished = '';
  $('stepper').classList.remove('stale');
  $('stepper').classList.add('empty');
  $('step-label').textContent = '–';
  $('step-title').textContent = '';
  $('step-explain').textContent = '';
  $('source').textContent = '';
}

window.addEventListener('popstate', () => location.reload());

$('upload').addEventListener('change', async (ev) => {
  const file = ev.target.files[0];
  if (!file) return;
  stopRun();
  // The views now show the file, not the form's run: a later check of the
  // form must not take the file for the run it names, nor put that run's
  // "Trace complete" back.
  state.query = '';
  state.finished = '';
  $('stepper').classList.remove('stale', 'empty');
  state.model = null;
  state.loaded = false;
  state.k = -1;
  state.want = 0;
  state.transport = `file ${file.name}`;
  try {
    const n = await readFile(file, handlersFor(), page.max_file_bytes);
    setStatus(`Replaying ${file.name}: ${n} records.`);
    finishedLoading();
  } catch (e) {
    // What the file held before it failed is no run to step: the error
    // stays, over empty views, until the next run or file.
    clearRun();
    setStatus(`Could not read ${file.name}: ${e.message}`, true);
  }
});

// ---- the run ----

// stopRun lets the current run go: nothing it still sends reaches the page,
// which has moved on to another run or a file.
function stopRun() {
  pause();
  state.run?.detach();
  state.run = null;
}

function handlersFor() {
  let lastStatus = 0;
  return {
    onHeader(h) {
      // A timing trace has no arrays: its views are the tile grid and the timeline.
      $('stepper').classList.toggle('timing-trace', h.timing);
      state.model = new TraceModel(h);
      setupRoles(h);
      setupSelectors(h);
      showSource(h);
      showKernelFigures(h);
      loadKernelSource(h.variant);
    },
    onRecord(r) {
      const m = state.model;
      m.add(r);
      if (r.kind === 'inputs') return;
      $('scrub').max = String(m.length);
      if (state.k < 0 || m.length - 1 === state.want) go(Math.min(state.want, m.length - 1));
      const now = performance.now();
      if (now - lastStatus > 100) {
        lastStatus = now;
        setStatus(`Streaming over ${state.transport}: ${m.length} steps received…`);
        updateLabel();
      }
    },
  };
}

function begin(query, wantStep) {
  stopRun();
  $('stepper').classList.remove('stale', 'empty');
  state.finished = '';
  state.query = query;
  state.model = null;
  state.loaded = false;
  state.k = -1;
  state.want = wantStep;
  state.t0 = performance.now();
  state.firstDrawn = false;
  $('run-status').removeAttribute('data-first-step-ms');
  setStatus('Starting the run…');
  const h = handlersFor();
  state.run = startRun(query, {
    ...h,
    onTransport(name) { state.transport = name; },
    onQueued(ahead) {
      setStatus(ahead < 0 ? 'Computing: the server has begun this run.' : ahead === 0
        ? 'Waiting: the server is computing other runs, and this one is next.'
        : `Waiting: ${ahead} run${ahead === 1 ? '' : 's'} ahead of this one in the server's queue.`);
    },
    onDone(info) {
      if (info.cancelled) setStatus(`Run cancelled after ${state.model?.length ?? 0} steps.`);
      else {
        const h = state.model.h;
        // A recording was computed when it was recorded, not now.
        const how = h.source === 'recording'
          ? `, replayed from a recording made ${new Date(h.recordedUnix * 1000).toISOString().slice(0, 10)}`
          : info.ms != null ? `, computed in ${info.ms < 1 ? 'under 1' : info.ms} ms` : '';
        state.finished = `Trace complete: ${state.model.length} steps over ${state.transport}${how}.`;
        setStatus(state.finished);
      }
      finishedLoading();
    },
    onError(msg, fields) {
      setStatus(msg, true);
      if (fields) showFieldErrors(fields);
    },
  });
}

function finishedLoading() {
  const m = state.model;
  if (!m) return;
  state.loaded = true;
  $('scrub').max = String(Math.max(1, m.length));
  if (state.urlNote) {
    state.finished += state.urlNote;
    state.urlNote = '';
    setStatus(state.finished);
  }
  if (state.want >= m.length && m.length > 0) {
    // A link past the end: show the last step and say why.
    go(m.length - 1);
    state.finished += ` This run has ${m.length} steps: step ${state.want + 1} does not exist, so the last is shown.`;
    setStatus(state.finished);
    return;
  }
  go(Math.min(Math.max(state.k, 0), m.length - 1));
}

// ---- stepping ----

function go(k) {
  const m = state.model;
  if (!m || m.length === 0) return;
  state.k = Math.max(0, Math.min(k, m.length - 1));
  render();
  const r = m.steps[state.k];
  const shown = { step: state.k + 1, total: m.length, kind: r.kind, bh: r.bh, i: r.i, j: r.j, query: state.query };
  if (page.embed && window.parent !== window) window.parent.postMessage({ type: 'flashstep-step', ...shown }, location.origin);
  // Other modules of the page (the classroom) follow the steps through
  // these events, and move the stepper with flashstep:go and flashstep:run.
  document.dispatchEvent(new CustomEvent('flashstep:step', { detail: shown }));
  if (!state.firstDrawn) {
    state.firstDrawn = true;
    $('run-status').dataset.firstStepMs = String(Math.round(performance.now() - state.t0));
  }
  syncURL();
}

// pagePath is where the URL keeps the run: the stepper's own path, or a
// classroom's /r/… that shows the stepper.
const pagePath = () => (location.pathname.startsWith('/r/') ? location.pathname : siteURL('/step'));

let urlTimer = null;
function syncURL() {
  if (!state.query) return;
  clearTimeout(urlTimer);
  const extra = (page.embed ? '&embed=1' : '') + (page.panels?.length ? `&panels=${page.panels.join(',')}` : '') +
    (know.upTo < Infinity ? `&taught=${know.upTo}` : '') + (digits !== 3 ? `&digits=${digits}` : '');
  urlTimer = setTimeout(() => history.replaceState(null, '', `${pagePath()}?${state.query}${extra}&step=${state.k + 1}`), 150);
}

function play() {
  if (state.timer || !state.model) return;
  if (state.k >= state.model.length - 1) go(0);
  const rate = Number($('speed').value);
  state.timer = setInterval(() => {
    if (state.k >= state.model.length - 1) return pause();
    go(state.k + 1);
  }, 1000 / rate);
  $('play').classList.add('playing');
  $('play').setAttribute('aria-label', 'Pause');
}

function pause() {
  clearInterval(state.timer);
  state.timer = null;
  $('play').classList.remove('playing');
  $('play').setAttribute('aria-label', 'Play');
}

const step = (d) => { pause(); go(state.k + d); };
$('first').onclick = () => { pause(); go(0); };
$('prev').onclick = () => step(-1);
$('next').onclick = () => step(1);
$('last').onclick = () => { pause(); go(state.model?.length - 1); };
$('play').onclick = () => (state.timer ? pause() : play());
$('speed').onchange = () => { if (state.timer) { pause(); play(); } };
$('scrub').oninput = (ev) => { pause(); go(Number(ev.target.value) - 1); };

// Modules of the page move the stepper: to a step (from 1), or to a new run.
document.addEventListener('flashstep:go', (ev) => { pause(); go(Number(ev.detail.step) - 1); });
document.addEventListener('flashstep:run', (ev) => {
  const { query, step = 1 } = ev.detail;
  if (query === state.query && state.model) return go(step - 1);
  history.replaceState(null, '', `${pagePath()}?${query}`);
  begin(query, step - 1);
});

// Framed in a lesson, the page waits to be wanted before it starts its run.
let waiting = Boolean(page.valid);

// A lesson around an embedded stepper may move it, and release the numbers
// it holds once their checkpoint is answered.
window.addEventListener('message', (ev) => {
  if (ev.origin !== location.origin) return;
  if (ev.data?.type === 'flashstep-release') {
    held.clear();
    heldRoles.clear();
    if (state.model) go(state.k);
    return;
  }
  if (ev.data?.type !== 'flashstep-go') return;
  if (waiting) {
    // Not built yet: build it at that step.
    page.step = Number(ev.data.step);
    wanted();
    return;
  }
  pause();
  go(Number(ev.data.step) - 1);
});

document.addEventListener('keydown', (ev) => {
  if (ev.target.closest('input, select, textarea') || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const keys = { ArrowLeft: () => step(-1), ArrowRight: () => step(1), Home: () => $('first').onclick(), End: () => $('last').onclick(), ' ': () => $('play').onclick(), p: () => setProjector(!document.body.classList.contains('projector')) };
  const f = keys[ev.key];
  if (f) { ev.preventDefault(); f(); }
});

function setupSelectors(h) {
  // The batch-heads in the box's few characters, "b1 h7"; each says in
  // words what it is, "batch 1, head 7".
  const bh = $('sel-bh');
  bh.replaceChildren();
  for (let b = h.tracedBH[0]; b < h.tracedBH[1]; b++) {
    const o = new Option(batchHeadShort(h, b), String(b));
    o.title = batchHead(h, b);
    bh.add(o);
  }
  if (backward.isBackward(h)) {
    // A backward's blocks are kv-tiles: the box picks one, and jumps to
    // its first step.
    $('sel-q-label').textContent = 'kv-tile';
    const q = $('sel-q');
    q.replaceChildren();
    for (let j = 0; j < h.Tc; j++) q.add(new Option(`${j} (keys ${j * h.Bc}–${Math.min(h.N, (j + 1) * h.Bc) - 1})`, `kv${j}`));
    return;
  }
  // Before tiles are taught, a q-tile is its rows.
  const tiles = know.knows('tiles');
  $('sel-q-label').textContent = tiles ? 'Q-tile' : 'Rows';
  const q = $('sel-q');
  q.replaceChildren();
  for (let i = h.tracedQ[0]; i < h.tracedQ[1]; i++) {
    const rows = `${i * h.Br}–${Math.min(h.N, (i + 1) * h.Br) - 1}`;
    q.add(new Option(tiles ? `${i} (rows ${rows})` : rows, String(i)));
  }
}

function jumpToBlock() {
  const m = state.model;
  if (!m) return;
  const k = m.blockStart.get(`${$('sel-bh').value},${$('sel-q').value}`);
  if (k === undefined) return setStatus(backward.isBackward(m.h) ? 'That kv-tile\'s block has not arrived yet.' : 'That q-tile has not arrived yet.');
  pause();
  go(k);
}
$('sel-bh').onchange = jumpToBlock;
$('sel-q').onchange = jumpToBlock;

// jumpToTile goes to the step that worked on tile (i, j) of the current
// batch-head, as the grid's click asks.
function jumpToTile(i, j) {
  const m = state.model;
  const cur = m?.steps[state.k];
  if (!cur) return;
  const k = m.steps.findIndex((r) => r.bh === cur.bh && r.i === i && (r.j === j || (r.j < 0 && cur.j < 0)));
  if (k >= 0) { pause(); go(k); }
}

// showKernelFigures says what ptxas (and, on a GPU, the driver) reported of
// the kernels that compute this run.
// kernelTables caches /api/kernels per run: the table, and the kernels the
// run launches (Launched), named by the server's registry.
const kernelTables = new Map();
async function showKernelFigures(h) {
  const el = $('kernel-figures');
  el.textContent = '';
  // A widget that shows some panels only (a lesson's) and not the
  // kernel's source has no place for the compiler's figures.
  if (el.hidden) return;
  if (!know.knows('registers')) {
    el.textContent = `The kernel's registers and spills, as its compiler reports them: ${know.lesson('registers')}.`;
    return;
  }
  const run = new URLSearchParams({ variant: h.variant, n: h.N, d: h.D, br: h.Br, bc: h.Bc, causal: h.causal ? '1' : '0' }).toString();
  if (!kernelTables.has(run)) kernelTables.set(run, await apiFetch('/api/kernels?' + run).then((r) => r.json()).catch(() => null));
  const kernelTable = kernelTables.get(run);
  if (!kernelTable) return;
  const names = kernelTable.Launched || [];
  const module = h.variant + (h.source === 'cpu' ? '' : '_traced');
  const parts = [];
  for (const n of names) {
    const row = kernelTable.Rows.find((r) => r.Module === module && r.Kernel === n);
    if (!row) continue;
    let s = `${n}: ${row.Registers} registers, ${row.SpillStores ? `${row.SpillStores} B of spills` : 'no spills'}` +
      `${row.StackBytes ? `, ${row.StackBytes} B stack` : ''} (ptxas, sm_90)`;
    if (row.Driver) s += `; driver: ${row.DriverRegisters} registers, ${row.LocalBytes} B local memory per thread`;
    parts.push(s);
  }
  if (parts.length) el.textContent = `Kernel${parts.length > 1 ? 's' : ''} (${module}.ptx): ${parts.join('; ')}. More on the Kernels page.`;
  else el.textContent = !materialises(h.variant) && h.source === 'cpu' ? `No compiled GPU kernel has ${h.Br}×${h.Bc} tiles with d=${h.D}: the mirror runs any shape.` : '';
}

// showSource says where the numbers come from; the folded form above it
// already names the run.
function showSource(h) {
  const when = h.recordedUnix ? `, recorded ${new Date(h.recordedUnix * 1000).toISOString().slice(0, 10)}` : '';
  $('source').textContent = `Numbers from: ${h.label}${when} · ${h.dtype}`;
  $('source').title = `${h.variant}, ${h.dtype}, N=${h.N}, d=${h.D}, Br×Bc=${h.Br}×${h.Bc}${h.causal ? ', causal' : ''}, ` +
    `batch ${h.batch} × ${h.heads} heads, inputs ${h.pattern} (seed ${h.seed})`;
  if (!page.valid || state.transport.startsWith('file')) {
    $('run-summary').textContent = `${h.variant} · N=${h.N} · d=${h.D} · Br×Bc=${h.Br}×${h.Bc}${h.causal ? ' · causal' : ''} · ${h.pattern} inputs, seed ${h.seed}`;
  }
}

// ---- the kernel's source beside the step ----

// The source of each kernel and which of its marked phases each kind of
// step ran (kernels/source.go owns both; the markers live in the .cu).
const kernelSources = new Map();

async function loadKernelSource(variant) {
  if (!kernelSources.has(variant)) {
    kernelSources.set(variant, null);
    const src = await apiFetch(`/api/source?variant=${variant}`).then((r) => (r.ok ? r.json() : null)).catch(() => null);
    kernelSources.set(variant, src);
  }
  buildSourceView(variant);
  if (state.model && state.k >= 0) drawKernelSource(state.model.h, state.model.steps[state.k]);
}

function buildSourceView(variant) {
  const src = kernelSources.get(variant);
  const pre = $('kernel-source');
  if (!src || pre.dataset.variant === variant) return;
  pre.dataset.variant = variant;
  const phaseOf = new Array(src.lines.length + 1).fill('');
  for (const p of src.phases) for (const r of p.regions) for (let n = r.first; n <= r.last; n++) phaseOf[n] = p.name;
  pre.replaceChildren(...src.lines.map((text, k) => {
    const line = document.createElement('span');
    line.className = 'line';
    line.dataset.n = String(k + 1);
    if (phaseOf[k + 1]) line.dataset.phase = phaseOf[k + 1];
    line.textContent = text + '\n';
    return line;
  }));
  $('source-caption').textContent = `Kernel source, ${src.file}: the lines this step ran are lit`;
  $('source-phases').replaceChildren(...src.phases.map((p) => {
    const li = document.createElement('li');
    li.dataset.phase = p.name;
    li.textContent = p.title;
    li.onclick = () => scrollCodeTo(pre.querySelector(`[data-phase="${p.name}"]`));
    return li;
  }));
}

function scrollCodeTo(line) {
  if (!line) return;
  const box = $('code-box');
  box.scrollTop = line.offsetTop - 8; // the box is the lines' offset parent
}

function stepKey(h, r) {
  if (backward.isBackward(h)) return backward.stepKey(h, r);
  if (r.kind === 'timing') return r.j < 0 ? 'epilogue' : r.j === 0 ? 'flash_step:first' : 'flash_step';
  return r.kind === 'flash_step' && r.j === 0 ? 'flash_step:first' : r.kind;
}

function drawKernelSource(h, r) {
  const src = kernelSources.get(h.variant);
  if (!src || $('kernel-source').dataset.variant !== h.variant) return;
  const lit = new Set(src.steps[stepKey(h, r)] || []);
  let first = null;
  for (const line of $('kernel-source').children) {
    const on = lit.has(line.dataset.phase);
    line.classList.toggle('lit', on);
    if (on && !first) first = line;
  }
  for (const li of $('source-phases').children) li.classList.toggle('lit', lit.has(li.dataset.phase));
  $('kernel-source').dataset.lit = [...lit].join(',');
  scrollCodeTo(first);
}

// ---- drawing the current step ----

// stepsTotal is how many steps a trace has: every record but the inputs,
// and in a roles trace but the role records. A roles trace of B blocks
// holds, per block, a timing record and the rung's per-tile role records
// for each kv-tile, then the epilogue's timing record and the per-block
// ones; a rung whose table the page lacks is counted once it has arrived.
function stepsTotal(h) {
  if (!h.timing) return h.records - (h.tracedBH[1] - h.tracedBH[0]);
  if (!h.roles) return h.records;
  const t = roleTables[h.variant];
  const blocks = (h.tracedBH[1] - h.tracedBH[0]) * (h.tracedQ[1] - h.tracedQ[0]);
  if (!t) return state.loaded && state.model ? state.model.length : h.records;
  return (h.records - blocks * (1 + t.per_block)) / (1 + t.per_tile) + blocks;
}

// setupRoles shows the warp roles' lanes for a roles trace alone, and for a
// lesson's reader only from the lesson that teaches warp roles.
function setupRoles(h) {
  $('roles-box').hidden = !h.roles;
  if (h.roles && !know.knows('roles')) {
    views.roles.untaught(`What each warp role of a block did, and when (the producer's copies, each consumer's waits, products and softmax): ${know.lesson('roles')}.`);
  }
}

function updateLabel() {
  const m = state.model;
  if (!m) return;
  $('step-label').textContent = `${state.k + 1} / ${stepsTotal(m.h)}`;
  $('scrub').value = String(state.k + 1);
}

// placeViews tells the projector layout where the views start, so they
// take the rest of the screen.
function placeViews() {
  if (!document.body.classList.contains('projector')) return;
  const top = document.querySelector('.views').getBoundingClientRect().top + window.scrollY;
  document.documentElement.style.setProperty('--views-top', `${Math.round(top)}px`);
}

function render() {
  const m = state.model;
  const h = m.h;
  const r = m.steps[state.k];
  updateLabel();
  $('sel-bh').value = String(r.bh);
  $('sel-q').value = backward.isBackward(h) ? (r.j >= 0 ? `kv${r.j}` : $('sel-q').value) : String(r.i);
  const [title, explain] = describe(h, r, know);
  $('step-title').textContent = title;
  $('step-explain').textContent = explain;
  placeViews();
  views.grid.draw(h, m.tileStates(state.k));
  if (backward.isBackward(h)) {
    backward.draw({ h, m, r, k: state.k, views, $ });
  } else {
    restoreFinal();
    drawInputs(h, m, r);
    drawTiles(h, m, r);
    drawRows(h, m, r);
    drawFinal(h, m, r);
  }
  if (know.knows('gpu')) views.timeline.draw(m, state.k, state.loaded || m.length >= stepsTotal(h));
  if (h.roles && know.knows('gpu') && know.knows('roles')) views.roles.draw(m, state.k, state.loaded);
  drawKernelSource(h, r);
  $('bytes-read').textContent = fmtBytes(m.cumRead[state.k]);
  $('bytes-written').textContent = fmtBytes(m.cumWritten[state.k]);
  $('bytes-note').textContent = rung(h.variant)?.bytes_note || (!materialises(h.variant)
    ? 'Flash reads Q once per q-tile and K, V once per visited tile; S and P never leave the chip.'
    : 'Naive writes all of S and P (N² floats each) to device memory and reads them back.');
}

function drawInputs(h, m, r) {
  const box = $('qkv');
  const inp = m.inputs.get(r.bh);
  if (!inp) {
    box.textContent = h.timing ? 'A timing trace records no arrays.' : 'No inputs in this trace.';
    box.dataset.key = '';
    return;
  }
  const mats = [];
  const tile = (name, src, t, rows, valid, label) => ({ name, src, t, rows, valid, label });
  const needQ = r.kind === 'flash_step' || r.kind === 'scores';
  const needK = r.kind === 'flash_step' || r.kind === 'scores';
  const needV = r.kind === 'flash_step' || r.kind === 'pv';
  if (needQ) mats.push(tile('Q', inp.q, r.i, h.Br, r.rowsValid, `Q${sub(r.i)} (${h.Br}×${h.D})`));
  if (needK) mats.push(tile('K', inp.k, r.j, h.Bc, r.colsValid, `K${sub(r.j)} (${h.Bc}×${h.D})`));
  if (needV) mats.push(tile('V', inp.v, r.j, h.Bc, r.colsValid, `V${sub(r.j)} (${h.Bc}×${h.D})`));
  if (!mats.length) {
    box.textContent = r.kind === 'softmax' ? 'Reads rows of S, not Q, K or V.' : 'No input tiles in this step.';
    box.dataset.key = '';
    return;
  }
  const key = mats.map((t) => `${t.name}${t.t}`).join() + r.bh;
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren();
  for (const t of mats) {
    const wrap = document.createElement('div');
    wrap.className = 'mat';
    const cap = document.createElement('span');
    cap.textContent = t.label;
    const hm = document.createElement('div');
    wrap.append(cap, hm);
    box.append(wrap);
    const values = new Float32Array(t.rows * h.D);
    values.set(t.src.subarray(t.t * t.rows * h.D, Math.min(h.N, (t.t + 1) * t.rows) * h.D));
    const row0 = t.t * t.rows;
    new Heatmap(hm, { maxWidth: 220, maxHeight: 220 }).draw({
      values, rows: t.rows, cols: h.D, rowsValid: t.valid, colsValid: h.D, scale: 'diverging',
      max: m.maxAbs(r.bh, t.name.toLowerCase()), name: t.name, rowIndex: (x) => row0 + x,
    });
  }
}

function drawTiles(h, m, r) {
  const rowIndex = (x) => r.i * h.Br + x;
  const colIndex = (x) => r.j * h.Bc + x;
  if (r.s) {
    $('s-caption').textContent = `S tile (${r.i}, ${r.j}) = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d`;
    views.s.draw({ values: r.s, rows: h.Br, cols: h.Bc, rowsValid: r.rowsValid, colsValid: r.colsValid,
      scale: 'diverging', max: m.maxAbs(r.bh, 's'), name: 'S', rowIndex, colIndex, colWord: 'key',
      masked: know.knows('causal') ? '−∞: masked' : `−∞: masked (the causal mask: ${know.lesson('causal')})` });
  } else {
    $('s-caption').textContent = 'S tile';
    views.s.clear(r.kind === 'pv' ? 'S is gone: phase 3 reads P.' : 'No S tile in this step.');
  }
  if (r.p) {
    // What P holds: each score's exponential less the largest score its
    // row has met so far (this tile's included), not yet divided by the
    // row's sum. Before lesson 5 that is said in words, with the lesson
    // that says why.
    $('p-caption').textContent = r.kind === 'pv' ? `P tile (${r.i}, ${r.j}), read from device memory`
      : know.knows('online') ? 'P = exp(S − m_new), unnormalised'
        : `P = exp(S − the row's largest score so far), not yet divided by the row's sum (${know.lesson('online')} says why)`;
    views.p.draw({ values: r.p, rows: h.Br, cols: h.Bc, rowsValid: r.rowsValid, colsValid: r.colsValid,
      scale: 'sequential', max: r.kind === 'pv' ? m.maxAbs(r.bh, 'p', 'pv') : 1, name: 'P', rowIndex, colIndex, colWord: 'key' });
  } else {
    $('p-caption').textContent = 'P tile';
    views.p.clear(r.kind === 'scores' ? (materialises(h.variant) ? 'P does not exist yet: phase 2 computes it.' : 'P does not exist yet: pass 2 computes it, once the row max is known.') : 'No P tile in this step.');
  }
  if (r.o) {
    const online = know.knows('online');
    $('o-caption').textContent = r.kind === 'epilogue' ? (online ? `O${sub(r.i)} = O / l, normalised` : `O${sub(r.i)}: each row divided by its row's sum, final`)
      : rung(h.variant)?.o_caption ? fill(rung(h.variant).o_caption, h, r)
        : materialises(h.variant) ? 'O accumulator'
          : online ? 'O accumulator, unnormalised (÷ l at the end)' : `O so far, not yet divided by each row's sum (${know.lesson('online')} says why)`;
    views.o.draw({ values: r.o, rows: h.Br, cols: h.D, rowsValid: r.rowsValid, colsValid: h.D,
      scale: 'diverging', max: m.maxAbs(r.bh, 'o', r.kind), name: 'O', rowIndex });
  } else {
    $('o-caption').textContent = 'O accumulator';
    views.o.clear('O is not touched in this step.');
  }
}

// lastFlashStep is the step before the epilogue of (bh, i): its m and l.
function lastFlashStep(m, r) {
  for (let k = state.k - 1; k >= 0; k--) {
    const s = m.steps[k];
    if (s.bh === r.bh && s.i === r.i && s.kind === 'flash_step') return s;
  }
  return null;
}

function softmaxStep(m, r) {
  return m.steps.find((s) => s.kind === 'softmax' && s.bh === r.bh && s.i === r.i && m.steps.indexOf(s) <= state.k);
}

// Each column of the rows table: its heading as a formula, typeset, and in
// words for a screen reader, which reads no drawn formula.
const ROW_HEADS = {
  row: ['\\text{row}', 'row'],
  keys: ['\\text{keys met}', 'keys met'],
  mOld: ['m_{\\text{old}}', 'm old'],
  mNew: ['m_{\\text{new}}', 'm new'],
  alpha: ['\\alpha = e^{\\,m_{\\text{old}} - m_{\\text{new}}}', 'alpha, e to the m old minus m new'],
  l: ['l', 'l'],
  m: ['m', 'm'],
  lse: ['\\text{LSE} = m + \\log l', 'LSE, m plus log l'],
  mMax: ['m = \\max_c S', 'm, the largest score of the row'],
  lSum: ['l = \\textstyle\\sum_c e^{S - m}', 'l, the sum over the row of e to the S minus m'],
  mSoFar: ['m = \\max S \\text{ so far}', 'm, the largest score so far'],
  tileMax: ['\\max S \\text{ (this tile)}', 'the row\'s largest score in this tile'],
  sumP: ['\\textstyle\\sum p \\text{ (this tile)}', 'the sum of the row\'s p in this tile'],
};

// tilesUnreadable says whether the S and P tiles shown print no numbers
// in their cells (too many columns for the room: a 64-key tile): the rows
// table then gives what a student needs of them, each row's largest score
// and its sum of p in the tile.
function tilesUnreadable() {
  const shown = ['s', 'p'].filter((v) => !$(`${v}-tile`).closest('[data-panel]').hidden);
  return shown.length > 0 && shown.every((v) => views[v].canvas.dataset.fontPx === '0');
}

function drawRows(h, m, r) {
  const online = know.knows('online');
  $('rows-caption').textContent = !online ? 'Per row of this step: the keys it has met'
    : rung(h.variant)?.rows_caption ? rung(h.variant).rows_caption
      : 'Online softmax, per row of the q-tile';
  const table = $('rows');
  table.replaceChildren();
  const note = $('rows-note');
  note.textContent = '';
  if (r.kind === 'timing') return;
  const head = table.createTHead().insertRow();
  const cols = [];
  const addCol = (name, testid, get, cls) => cols.push({ name, testid, get, cls });
  addCol('row', 'row', (x) => r.i * h.Br + x);
  if (!online) {
    // Lessons 1–4 know the rows and the keys each has been scored against;
    // the running max and sum that go with them are lesson 5's.
    const seen = r.kind === 'flash_step' || r.kind === 'scores' ? Math.min(h.N, (r.j + 1) * h.Bc) : h.N;
    addCol('keys', 'keys', () => (seen === h.N ? `all ${h.N}` : `0–${seen - 1}`));
    note.textContent = `The running max m, the running sum l and the rescale α of each row: ${know.lesson('online')}.`;
  } else if (r.kind === 'flash_step') {
    addCol('mOld', 'm-old', (x) => r.m_old[x]);
    addCol('mNew', 'm-new', (x) => r.m_new[x], (x) => (r.m_new[x] > r.m_old[x] ? 'grew' : ''));
    addCol('alpha', 'alpha', (x) => r.alpha[x]);
    addCol('l', 'l', (x) => r.l[x]);
    if (r.s && r.p && tilesUnreadable()) {
      const cells = (a, x) => a.subarray(x * h.Bc, x * h.Bc + r.colsValid);
      addCol('tileMax', 'tile-max', (x) => cells(r.s, x).reduce((a, v) => Math.max(a, v), -Infinity));
      addCol('sumP', 'sum-p', (x) => cells(r.p, x).reduce((a, v) => a + v, 0));
      note.textContent = `The tiles have ${r.colsValid} columns, too many to print each score: the last two columns give each row's largest score in this tile and the sum of its p here (hover over a cell of S or P for its own value).`;
    }
  } else if (r.kind === 'epilogue') {
    const last = !materialises(h.variant) ? lastFlashStep(m, r) : softmaxStep(m, r);
    if (last) {
      addCol('m', 'm-new', (x) => (last.m_new ?? last.m)[x]);
      addCol('l', 'l', (x) => last.l[x]);
    }
    addCol('lse', 'lse', (x) => r.lse[x]);
  } else if (r.kind === 'softmax' || r.kind === 'pv') {
    const sm = r.kind === 'softmax' ? r : softmaxStep(m, r);
    if (sm) {
      addCol('mMax', 'm-new', (x) => sm.m[x]);
      addCol('lSum', 'l', (x) => sm.l[x]);
    }
  } else if (!materialises(h.variant)) {
    // Pass 1 of a rung that walks the keys twice (naive_row): each
    // thread's running max so far, the largest score of its row
    // in this q-tile's scores records up to this one (no l yet).
    const seen = m.steps.filter((x) => x.kind === 'scores' && x.bh === r.bh && x.i === r.i && x.j <= r.j);
    addCol('mSoFar', 'm-new', (x) => seen.reduce((a, t) => Math.max(a, ...t.s.subarray(x * h.Bc, (x + 1) * h.Bc)), -Infinity));
    const cap = table.createCaption();
    cap.textContent = 'Pass 1 takes only the row max; l and O wait for pass 2.';
  } else {
    const cap = table.createCaption();
    cap.textContent = 'Naive keeps no running m or l: phase 2 computes them from all of S.';
  }
  for (const c of cols) {
    const [formula, words] = ROW_HEADS[c.name];
    const th = head.appendChild(document.createElement('th'));
    th.scope = 'col';
    const said = th.appendChild(document.createElement('span'));
    said.className = 'sr-only';
    said.textContent = words;
    const drawn = th.appendChild(document.createElement('span'));
    drawn.setAttribute('aria-hidden', 'true');
    tex(drawn, formula, { output: 'html' });
  }
  const body = table.createTBody();
  const shown = Math.min(h.Br, 64);
  let negInf = false;
  for (let x = 0; x < shown; x++) {
    const tr = body.insertRow();
    if (x >= r.rowsValid) {
      tr.className = 'pad';
      const td = tr.insertCell();
      td.colSpan = cols.length;
      td.textContent = `row ${r.i * h.Br + x}: padding (past N), not data`;
      continue;
    }
    const hidden = holds(r, r.i * h.Br + x);
    for (const c of cols) {
      const td = tr.insertCell();
      const v = c.get(x);
      td.dataset.testid = `${c.testid}-${x}`;
      if (typeof v !== 'number' || c.testid === 'row') {
        td.textContent = String(v);
        continue;
      }
      if (hidden?.has(c.testid)) {
        td.textContent = '?';
        td.className = 'held';
        td.title = 'The lesson asks you to predict this: it shows once you have answered the checkpoint.';
        continue;
      }
      td.dataset.value = String(v);
      td.textContent = fmt(v, 6);
      td.title = String(v);
      const cls = [c.cls?.(x), v === -Infinity ? 'neginf' : ''].filter(Boolean).join(' ');
      if (cls) td.className = cls;
      negInf ||= v === -Infinity;
    }
  }
  if (h.Br > shown) {
    const tr = body.insertRow();
    const td = tr.insertCell();
    td.colSpan = cols.length;
    td.textContent = `… ${h.Br - shown} more rows`;
  }
  // −∞ is where a max starts before any score, or a row masked whole: no error.
  if (negInf) note.textContent = [note.textContent, '−∞: no score seen yet, where every max starts (or every score masked). Not an error.'].filter(Boolean).join(' ');
}

// restoreFinal gives the final panel back to the forward's O after a
// backward run drew its own views there.
function restoreFinal() {
  const box = $('o-final');
  if (box.contains(views.final.canvas)) return;
  box.classList.remove('qkv');
  box.replaceChildren(views.final.canvas, views.final.scaleBar);
  box.closest('figure').querySelector('figcaption').textContent = FINAL_CAPTION;
}
const FINAL_CAPTION = document.querySelector('[data-panel="final"] figcaption').textContent;

function drawFinal(h, m, r) {
  const o = m.finalO.get(r.bh);
  if (!o) return views.final.clear('No q-tile has finished yet.');
  // Only rows whose epilogue is at or before this step are written.
  const values = new Float32Array(h.N * h.D).fill(NaN);
  let written = 0;
  for (const [key, at] of m.epilogueAt) {
    const [bh, i] = key.split(',').map(Number);
    if (bh !== r.bh || at > state.k) continue;
    const lo = i * h.Br * h.D, hi = Math.min(h.N, (i + 1) * h.Br) * h.D;
    values.set(o.subarray(lo, hi), lo);
    written++;
  }
  if (!written) return views.final.clear('No q-tile has finished yet.');
  views.final.draw({ values, rows: h.N, cols: h.D, rowsValid: h.N, colsValid: h.D,
    scale: 'diverging', max: m.maxAbs(r.bh, 'o', 'epilogue'), name: 'O' });
}

// ---- layouts: projector, and embedded in a lesson ----

// setProjector fits the key views (tile grid, S, P, the m, α, l table and O)
// on one screen with large numbers, for a room to read; the choice is kept.
function setProjector(on) {
  document.body.classList.toggle('projector', on);
  $('projector').setAttribute('aria-pressed', String(on));
  try { localStorage.setItem('flashstep.projector', on ? '1' : '0'); } catch { /* private mode */ }
  if (on) $('run-settings').open = false;
  if (state.model && state.k >= 0) render();
}
$('projector').onclick = () => setProjector(!document.body.classList.contains('projector'));

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (state.model && state.k >= 0) render(); }, 100);
});

// A view of an idea a later lesson teaches says which lesson, in place of
// its numbers.
const UNTAUGHT_VIEWS = {
  bytes: ['memory', 'The bytes each step moves to and from device memory'],
  timeline: ['gpu', 'Which of the GPU\'s SMs ran each step, and when'],
};
for (const [name, [idea, what]] of Object.entries(UNTAUGHT_VIEWS)) {
  if (know.knows(idea)) continue;
  const fig = document.querySelector(`[data-panel="${name}"]`);
  const p = document.createElement('p');
  p.className = 'note untaught-note';
  p.textContent = `${what}: ${know.lesson(idea)}.`;
  fig.classList.add('untaught');
  fig.append(p);
}

// ---- start ----

{
  const asked = new URLSearchParams(location.search).get('layout');
  let saved = null;
  try { saved = localStorage.getItem('flashstep.projector'); } catch { /* private mode */ }
  if (asked === 'projector' || (asked === null && saved === '1' && !page.embed)) setProjector(true);
}
state.urlNote = page.step_error ? ` The link's ${page.step_error}.` : '';
// Framed in a lesson, the run waits until its frame comes into view.
if (page.valid) {
  if (waitsToBeWanted()) setStatus('This run starts when the lesson reaches it.');
  whenWanted().then(() => { waiting = false; if (!state.run && !state.model) begin(page.query, Math.max(0, page.step - 1)); });
}
else if (page.step_error) setStatus(page.step_error, true);

if (page.embed) reportSize();
