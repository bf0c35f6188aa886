// Stepping through a run: to a step, one at a time, or playing; the URL
// kept on the step shown; the page's other modules, a lesson around a
// framed stepper and the keyboard moving it; the boxes that jump to a
// batch-head's q-tile (or a backward's kv-tile) and the grid's click.
import { batchHead, batchHeadShort } from './steps.js';
import { keysRange, rowsRange } from './shape.js';
import { isBackward } from './backward_model.js';
import { isSplitKind } from './splits.js';
import { wanted } from './embed.js';
import { $, digits, held, heldRoles, kindHolds, know, page, pagePath, setStatus, state } from './stepper_page.js';
import { clearHolds } from './holds.js';
import { render } from './stepper_panels.js';
import { setProjector } from './projector.js';

// go shows step k (from 0; clamped to the run's steps), tells the page's
// other modules and a lesson around the frame, and keeps the URL on it.
export function go(k) {
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

// syncURL keeps the run and the step shown in the URL, a moment after the
// last step.
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

export function pause() {
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

// Modules of the page move the stepper to a step (from 1); stepper_run.js
// hears them ask for a new run.
document.addEventListener('flashstep:go', (ev) => { pause(); go(Number(ev.detail.step) - 1); });

// A lesson around an embedded stepper may move it, and release the numbers
// it holds once their checkpoint is answered.
window.addEventListener('message', (ev) => {
  if (ev.origin !== location.origin) return;
  if (ev.data?.type === 'flashstep-release') {
    held.clear();
    heldRoles.clear();
    clearHolds(kindHolds);
    if (state.model) go(state.k);
    return;
  }
  if (ev.data?.type !== 'flashstep-go') return;
  if (state.waiting) {
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

export function setupSelectors(h) {
  // The batch-heads in the box's few characters, "b1 h7"; each says in
  // words what it is, "batch 1, head 7".
  const bh = $('sel-bh');
  bh.replaceChildren();
  for (let b = h.tracedBH[0]; b < h.tracedBH[1]; b++) {
    const o = new Option(batchHeadShort(h, b), String(b));
    o.title = batchHead(h, b);
    bh.add(o);
  }
  if (isBackward(h)) {
    // A backward's blocks are kv-tiles: the box picks one, and jumps to
    // its first step.
    $('sel-q-label').textContent = 'kv-tile';
    const q = $('sel-q');
    q.replaceChildren();
    for (let j = 0; j < h.Tc; j++) q.add(new Option(`${j} (keys ${keysRange(h, j)})`, `kv${j}`));
    return;
  }
  // Before tiles are taught, a q-tile is its rows.
  const tiles = know.knows('tiles');
  $('sel-q-label').textContent = tiles ? 'Q-tile' : 'Rows';
  const q = $('sel-q');
  q.replaceChildren();
  for (let i = h.tracedQ[0]; i < h.tracedQ[1]; i++) {
    const rows = rowsRange(h, i); // query rows, of Nq
    q.add(new Option(tiles ? `${i} (rows ${rows})` : rows, String(i)));
  }
}

function jumpToBlock() {
  const m = state.model;
  if (!m) return;
  const k = m.blockStart.get(`${$('sel-bh').value},${$('sel-q').value}`);
  if (k === undefined) return setStatus(isBackward(m.h) ? 'That kv-tile\'s block has not arrived yet.' : 'That q-tile has not arrived yet.');
  pause();
  go(k);
}
$('sel-bh').onchange = jumpToBlock;
$('sel-q').onchange = jumpToBlock;

// jumpToTile goes to the step that worked on tile (i, j) of the current
// batch-head, as the grid's click asks.
export function jumpToTile(i, j) {
  const m = state.model;
  const cur = m?.steps[state.k];
  if (!cur) return;
  // A split's end or merge has a split for j, not a kv-tile.
  const k = m.steps.findIndex((r) => r.bh === cur.bh && r.i === i && !isSplitKind(r.kind) && (r.j === j || (r.j < 0 && cur.j < 0)));
  if (k >= 0) { pause(); go(k); }
}
