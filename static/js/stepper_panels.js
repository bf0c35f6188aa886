// Drawing the stepper's current step: its title and explanation, the tile
// grid, the input tiles, S, P and O, the rows table, the final O (or a
// backward step's own views), the timeline and the roles' lanes, the
// kernel's lit source, and the bytes moved so far; the step label.
import { Heatmap } from './heatmap.js';
import { fmtBytes } from './format.js';
import { describe, fill, materialises, sub } from './steps.js';
import { rung } from './rungs.js';
import { isBackward } from './backward_model.js';
import * as backward from './backward.js';
import { $, kindHolds, know, page, roleTables, state, views } from './stepper_page.js';
import { anyHeld, isHeld, mergeHeldRows } from './holds.js';
import { drawKernelSource } from './source_view.js';
import { drawRows } from './stepper_rows.js';
import { scoresCount, scoresShape, shapeNote } from './shape.js';
import { MergeView } from './merge_view.js';
import { PageTableView } from './page_table_view.js';
import { paged } from './pages.js';
import { splitOfStep, startsSplit } from './splits.js';

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
export function setupRoles(h) {
  $('roles-box').hidden = !h.roles;
  if (h.roles && !know.knows('roles')) {
    views.roles.untaught(`What each warp role of a block did, and when (the producer's copies, each consumer's waits, products and softmax): ${know.lesson('roles')}.`);
  }
}

// updateLabel writes the step shown out of the run's steps, and moves the
// scrubber there.
export function updateLabel() {
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

// render draws the step shown (state.k) in every view. The page's first
// drawing goes a view per task, so that a lesson whose frames all draw as
// it loads is never held for the sum of their views (a real-tiles frame's
// first drawing was one task of 50 to 120 ms); every later one, a step the
// reader asked for, draws whole at once.
let drawnOnce = false;
export function render() {
  const m = state.model;
  const h = m.h;
  const r = m.steps[state.k];
  updateLabel();
  $('sel-bh').value = String(r.bh);
  $('sel-q').value = isBackward(h) ? (r.j >= 0 ? `kv${r.j}` : $('sel-q').value) : String(r.i);
  const [title, explain] = describe(h, r, know, m);
  $('step-title').textContent = title;
  $('step-explain').textContent = explain;
  placeViews();
  const splits = m.splits;
  if (GRID_CAPTION) GRID_CAPTION.textContent = `Score matrix S (${scoresShape(h)}), in tiles` + (splits ? `, in ${splits.splits} split${splits.splits === 1 ? '' : 's'} of the keys` : '');
  const views_ = [() => views.grid.draw(h, m.tileStates(state.k), splits, splitOfStep(m, state.k))];
  if (isBackward(h)) {
    views_.push(() => backward.draw({ h, m, r, k: state.k, views, $ }));
  } else {
    views_.push(() => { restoreFinal(); drawInputs(h, m, r); }, () => { drawMerge(m, r); drawTiles(h, m, r); }, () => drawRows(h, m, r), () => drawFinal(h, m, r), () => drawPages(m));
  }
  if (know.knows('gpu')) views_.push(() => views.timeline.draw(m, state.k, state.loaded || m.length >= stepsTotal(h)));
  if (h.roles && know.knows('gpu') && know.knows('roles')) views_.push(() => views.roles.draw(m, state.k, state.loaded));
  views_.push(() => drawKernelSource(h, r), () => {
    $('bytes-read').textContent = fmtBytes(m.cumRead[state.k]);
    $('bytes-written').textContent = fmtBytes(m.cumWritten[state.k]);
    // A run with fewer queries than keys, or grouped heads, says too what
    // its Q, O, K and V take (K and V by heads of K and V).
    $('bytes-note').textContent = [rung(h.variant)?.bytes_note || (!materialises(h.variant)
      ? 'Flash reads Q once per q-tile and K, V once per visited tile; S and P never leave the chip.'
      : `Naive writes all of S and P (${scoresCount(h)} floats each) to device memory and reads them back.`), shapeNote(h)].filter(Boolean).join(' ');
  });
  if (drawnOnce) {
    for (const draw of views_) draw();
    return;
  }
  drawnOnce = true;
  // A view per task; a step asked for meanwhile draws every view itself,
  // and this drawing of the old step stops.
  const k = state.k, model = m;
  const next = (i) => {
    if (i === views_.length || state.k !== k || state.model !== model) return;
    views_[i]();
    setTimeout(() => next(i + 1), 0);
  };
  next(0);
}

// drawMerge shows the merge view (merge_view.js) on a split-KV trace's
// split ends, merges and epilogue, in the place of the S and P tiles, and
// hides it on every other step. A lesson's frame that names its panels
// gets it only where it names "merge".
let mergeView = null;
function drawMerge(m, r) {
  const wanted = !page.panels?.length || page.panels.includes('merge');
  if (!wanted || !MergeView.shows(m, r)) return mergeView?.hide();
  mergeView ??= new MergeView(document.querySelector('.views'), () => render(),
    (bh, row, k) => isHeld(kindHolds, 'merge', bh, row, k));
  mergeView.draw(m, state.k);
}

// drawPages shows the block table (page_table_view.js) on every step of
// a paged rung's trace. A lesson's frame that names its panels gets it
// only where it names "pages".
let pageView = null;
function drawPages(m) {
  const wanted = !page.panels?.length || page.panels.includes('pages');
  if (!wanted || !paged(m.h)) return pageView?.hide();
  pageView ??= new PageTableView(document.querySelector('.views'));
  pageView.draw(m, state.k);
}

const drawnFor = new WeakMap(); // the input tiles' box -> the model they were drawn from

function drawInputs(h, m, r) {
  const box = $('qkv');
  const inp = m.inputs.get(r.bh);
  if (!inp) {
    box.textContent = h.timing ? 'A timing trace records no arrays.' : 'No inputs in this trace.';
    box.dataset.key = '';
    return;
  }
  const mats = [];
  // all: the rows of the whole array, Q's the Nq queries, K's and V's the
  // N keys.
  const tile = (name, src, t, rows, valid, label, all) => ({ name, src, t, rows, valid, label, all });
  const needQ = r.kind === 'flash_step' || r.kind === 'scores';
  const needK = r.kind === 'flash_step' || r.kind === 'scores';
  const needV = r.kind === 'flash_step' || r.kind === 'pv';
  if (needQ) mats.push(tile('Q', inp.q, r.i, h.Br, r.rowsValid, `Q${sub(r.i)} (${h.Br}×${h.D})`, h.Nq));
  if (needK) mats.push(tile('K', inp.k, r.j, h.Bc, r.colsValid, `K${sub(r.j)} (${h.Bc}×${h.D})`, h.N));
  if (needV) mats.push(tile('V', inp.v, r.j, h.Bc, r.colsValid, `V${sub(r.j)} (${h.Bc}×${h.D})`, h.N));
  if (!mats.length) {
    box.textContent = r.kind === 'softmax' ? 'Reads rows of S, not Q, K or V.'
      : r.kind === 'split_end' ? 'Reads no Q, K or V: the split\'s end writes its partial O and LSE (float32) to device memory.'
        : r.kind === 'merge' ? 'Reads no Q, K or V: the merge reads the splits\' partial O and LSE back from device memory.'
          : 'No input tiles in this step.';
    box.dataset.key = '';
    return;
  }
  // The same tiles of the same run are drawn already (a run replaced by
  // another, a replayed file's say, draws afresh).
  const key = mats.map((t) => `${t.name}${t.t}`).join() + r.bh;
  if (box.dataset.key === key && drawnFor.get(box) === m) return;
  box.dataset.key = key;
  drawnFor.set(box, m);
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
    values.set(t.src.subarray(t.t * t.rows * h.D, Math.min(t.all, (t.t + 1) * t.rows) * h.D));
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
    $('o-caption').textContent = m.hasSplits && online && splitCaption(m, r) ? splitCaption(m, r)
      : r.kind === 'epilogue' ? (online ? `O${sub(r.i)} = O / l, normalised` : `O${sub(r.i)}: each row divided by its row's sum, final`)
      : rung(h.variant)?.o_caption ? fill(rung(h.variant).o_caption, h, r)
        : materialises(h.variant) ? 'O accumulator'
          : online ? 'O accumulator, unnormalised (÷ l at the end)' : `O so far, not yet divided by each row's sum (${know.lesson('online')} says why)`;
    // A merge or the epilogue of a row whose merge a checkpoint asks for
    // (hold=merge.…) shows that row as "?", on a scale its numbers do not
    // set: the splits' partials', which bound every merged O.
    const heldRows = mergeHeldRows(kindHolds, r, h.Br, state.k);
    const held = (x) => heldRows[x] ?? false;
    const anyRow = heldRows.some(Boolean);
    views.o.draw({ values: r.o, rows: h.Br, cols: h.D, rowsValid: r.rowsValid, colsValid: h.D,
      scale: 'diverging', max: anyRow ? m.maxAbs(r.bh, 'o', 'split_end') : m.maxAbs(r.bh, 'o', r.kind), name: 'O', rowIndex,
      held: anyRow ? held : undefined });
  } else {
    $('o-caption').textContent = 'O accumulator';
    views.o.clear('O is not touched in this step.');
  }
}

// splitCaption is the O panel's caption on a split-KV trace's steps: a
// split's running O (from 0 at its first kv-tile), its partial, the
// merge so far, the merged output.
function splitCaption(m, r) {
  const s = splitOfStep(m, state.k);
  switch (r.kind) {
    case 'flash_step': return s < 0 ? '' : startsSplit(m, state.k)
      ? `Split ${s}'s O accumulator, from O = 0 at this kv-tile (÷ l at the split's end)`
      : `Split ${s}'s O accumulator, unnormalised (÷ l at the split's end)`;
    case 'split_end': return `O${sub(s)} = O / l: split ${s}'s partial, divided by its own l`;
    case 'merge': return `O = Σ wₛ·Oₛ over splits 0–${s} so far`;
    case 'epilogue': return `O${sub(r.i)} = Σₛ wₛ·Oₛ, merged: final`;
  }
  return '';
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
// The grid's caption names S's shape: N×N, or Nq×N with fewer queries.
const GRID_CAPTION = document.querySelector('[data-panel="grid"] figcaption');

function drawFinal(h, m, r) {
  const o = m.finalO.get(r.bh);
  if (!o) return views.final.clear('No q-tile has finished yet.');
  // Only rows whose epilogue is at or before this step are written; O has
  // a row per query (Nq).
  const values = new Float32Array(h.Nq * h.D).fill(NaN);
  let written = 0;
  for (const [key, at] of m.epilogueAt) {
    const [bh, i] = key.split(',').map(Number);
    if (bh !== r.bh || at > state.k) continue;
    const lo = i * h.Br * h.D, hi = Math.min(h.Nq, (i + 1) * h.Br) * h.D;
    values.set(o.subarray(lo, hi), lo);
    written++;
  }
  if (!written) return views.final.clear('No q-tile has finished yet.');
  // A row whose merge a checkpoint asks for (hold=merge.…) is "?" here
  // too, on the splits' partials' scale.
  const held = anyHeld(kindHolds, 'merge', r.bh, state.k);
  views.final.draw({ values, rows: h.Nq, cols: h.D, rowsValid: h.Nq, colsValid: h.D,
    scale: 'diverging', max: held && m.hasSplits ? m.maxAbs(r.bh, 'o', 'split_end') : m.maxAbs(r.bh, 'o', 'epilogue'), name: 'O',
    held: held ? (x) => isHeld(kindHolds, 'merge', r.bh, x, state.k) : undefined });
}
