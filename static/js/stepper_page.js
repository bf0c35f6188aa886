// What every part of the stepper page shares: the page's data (on the static
// site, worked out from the URL as the server would have rendered it), what
// the reader has been taught, the numbers a lesson's checkpoint holds back,
// the views (built by stepper.js), the run's state and the status line.
import { Knowledge, taughtUpTo } from './taught.js';
import { call, embedded, fillForm, onSite, siteData, siteURL } from './site.js';
import { holdCount, letGo, parseHolds } from './holds.js';

export const $ = (id) => document.getElementById(id);
export const page = onSite && location.search ? await siteStepperPage() : JSON.parse($('page-data').textContent);

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

// What the reader knows: a lesson's frame says how far its course has gone
// (taught=N); the stepper's own page knows everything.
export const know = new Knowledge(taughtUpTo(location.search));

// held are the numbers a lesson's checkpoint asks the student to predict
// (hold=bh.row.step,…: row's online softmax from that step on): shown as
// "?" until the lesson says the checkpoint is answered (flashstep-release),
// so that the step that holds the inputs of a prediction does not print
// its answer beside them.
export const held = new Map();
// heldRoles are a roles run's held steps (hold=roles.bh.q.step): the lanes'
// note keeps back the softmax's overlap at that step of block (bh, q).
export const heldRoles = new Set();
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

// kindHolds are the holds that name their checkpoint (holds.js): a
// backward run's sums of p and finished dQ (hold=psum.bh.row.step.id,
// dq.bh.row.step.id) and a split-KV run's merge of a row
// (merge.bh.row.step.id). Every stepper of the run on the lesson's page
// holds them, so each follows its own checkpoint (the lesson's
// flashstep-settled, below); all go when the lesson releases the widget
// (flashstep-release, stepper_playback.js).
export const kindHolds = parseHolds(new URLSearchParams(location.search).get('hold'));

// holds says which of a row's numbers are held at the step shown: none
// before the step asked about; the new max, α and l at it, and at a row's
// first kv-tile (m_old = −∞) the tile's largest score and Σp too, which
// there are m_new and l themselves; everything after it (m_old then is the
// answer).
export function holds(r, row) {
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
export const digits = Math.min(7, Math.max(3, Number(new URLSearchParams(location.search).get('digits')) || 3));

// views are the stepper's views (the tile grid, the S, P and O tiles, the
// final O, the timeline and the roles' lanes), built by stepper.js.
export const views = {};

// The role tables of the rungs that record warp roles (kernels.RoleTable,
// by rung): how many role records follow each kv-tile's timing record and
// the epilogue's, so that a roles trace's steps are counted from its header.
export const roleTables = JSON.parse($('fs-role-tables')?.textContent || '{}');

export const state = {
  model: null,
  k: -1, // the step shown, counted from 0 here; the page and the URL count from 1
  want: 0, // the step the URL asked for (from 0), shown once it arrives
  query: page.query,
  run: null,
  timer: null,
  t0: 0,
  firstDrawn: false,
  transport: '',
  // Framed in a lesson, the page waits to be wanted before it starts its run.
  waiting: Boolean(page.valid),
};

export function setStatus(text, error = false) {
  const el = $('run-status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

// The lesson around an embedded stepper (same origin) says which of its
// checkpoints are answered: those answered before this frame loaded, and
// each one as it is. A hold let go redraws the step shown.
if (holdCount(kindHolds) > 0 && window.parent !== window) {
  const answered = (ids) => {
    if (letGo(kindHolds, ids) && state.model && state.k >= 0) {
      document.dispatchEvent(new CustomEvent('flashstep:go', { detail: { step: state.k + 1 } }));
    }
  };
  try {
    const lesson = window.parent.document;
    answered(new Set((lesson.body.dataset.settled || '').split(',').filter(Boolean)));
    lesson.addEventListener('flashstep-settled', (ev) => answered(new Set([ev.detail.checkpoint])));
  } catch {
    // Not a lesson's frame: the holds wait for flashstep-release.
  }
}

// pagePath is where the URL keeps the run: the stepper's own path, or a
// classroom's /r/… that shows the stepper.
export const pagePath = () => (location.pathname.startsWith('/r/') ? location.pathname : siteURL('/step'));
