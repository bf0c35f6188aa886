// The merge of a split-KV trace (splits.js), shown on a split's end, a
// merge and the epilogue: for one row of the step's q-tile, each split's
// keys, LSE_s, weight w_s and partial O_s beside the merged O so far and
// Σ w_s, as a table (the first columns of each O in numbers) and a heat
// strip (every column), with the checks worked out from the trace's
// numbers labelled as checks. Built into the page's views by the stepper
// when a trace has splits. A row whose merge a lesson's checkpoint asks
// for (hold=merge.…, holds.js) shows each split's LSEₛ and Oₛ, which the
// question gives, and "?" for everything the merge makes of them.
import { Heatmap } from './heatmap.js';
import { fmt } from './format.js';
import { sub } from './steps.js';
import { mergeState } from './splits.js';
import { withholdMerge } from './holds.js';
import { queryOffset, square } from './shape.js';

// COLS is how many columns of each O the table prints; the strip shows all.
const COLS = 4;

// HELD is a cell's value that a checkpoint holds back: drawn "?".
const HELD = Symbol('held');

const HELD_TITLE = 'The lesson asks you to predict this: it shows once you have answered the checkpoint.';

const el = (tag, props = {}, ...kids) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
};

// MergeView owns the merge panel: a figure among the key views, which the
// page's style shows (in the place of the S and P tiles, which a split's
// end or a merge has none of) while the views box has the class
// merge-step. held(bh, row, k) says whether a checkpoint holds back the
// merge of row (of the run's query rows) of batch-head bh at step k.
export class MergeView {
  constructor(views, onRow, held = () => false) {
    this.held = held;
    this.row = 0; // the row shown, within the q-tile
    this.figure = el('figure', { className: 'view merge-view' });
    this.figure.dataset.panel = 'merge';
    this.figure.dataset.testid = 'panel-merge';
    this.caption = el('figcaption', { id: 'merge-caption' }, 'The merge');
    this.pick = el('select', { id: 'merge-row' });
    this.pick.setAttribute('aria-label', 'The row whose merge is shown');
    this.pick.onchange = () => { this.row = Number(this.pick.value); onRow(); };
    this.pickLabel = el('label', { className: 'merge-row' }, 'Row ', this.pick);
    this.table = el('table', { id: 'merge-table' });
    this.table.dataset.testid = 'merge-table';
    const box = el('div', { className: 'table-box', id: 'merge-table-box', tabIndex: 0 }, this.table);
    box.setAttribute('role', 'region');
    box.setAttribute('aria-labelledby', 'merge-caption');
    const strip = el('div', { id: 'merge-strip', className: 'heat' });
    strip.dataset.testid = 'merge-strip';
    this.strip = new Heatmap(strip, { maxWidth: 560, maxHeight: 150, labels: true });
    this.note = el('p', { className: 'rows-note', id: 'merge-note' });
    this.note.dataset.testid = 'merge-note';
    this.checks = el('p', { className: 'rows-note merge-checks', id: 'merge-checks' });
    this.checks.dataset.testid = 'merge-checks';
    this.figure.append(this.caption, this.pickLabel, box, strip, this.note, this.checks);
    views.querySelector('.rows-view')?.after(this.figure) ?? views.append(this.figure);
    this.views = views;
  }

  // shown says whether the view is on screen for step r.
  static shows(m, r) {
    return Boolean(m.hasSplits) && (r.kind === 'split_end' || r.kind === 'merge' || r.kind === 'epilogue');
  }

  hide() { this.views.classList.remove('merge-step'); }

  draw(m, k) {
    const h = m.h, r = m.steps[k];
    this.views.classList.add('merge-step');
    this.row = Math.max(0, Math.min(this.row, r.rowsValid - 1));
    // The rows of the q-tile, as query rows (and positions, where there
    // are fewer queries than keys).
    this.pick.replaceChildren(...Array.from({ length: r.rowsValid }, (_, x) => {
      const row = r.i * h.Br + x;
      return new Option(square(h) ? `${row}` : `${row} (position ${queryOffset(h) + row})`, String(x));
    }));
    this.pick.value = String(this.row);
    this.pickLabel.hidden = r.rowsValid < 2;
    const whole = mergeState(m, k, this.row);
    const st = whole && this.held(whole.bh, whole.row, k) ? withholdMerge(whole) : whole;
    const S = st.layout.splits;
    const now = r.kind === 'epilogue' ? S : r.j; // the split this step ends or merges
    this.caption.textContent = `The merge of row ${st.row}: ${S} split${S === 1 ? '' : 's'}' partials and the merged O` +
      (r.kind === 'split_end' ? ` (split ${r.j} has ended; the merge kernel runs once every split has)` : r.kind === 'merge' ? ` (split ${r.j} merged)` : ' (final)');
    this.drawTable(h, st, r, now);
    this.drawStrip(m, h, st, r);
    this.note.textContent = 'Each split\'s block divided its O by its own l: Oₛ is a softmax-weighted average of its keys\' values alone, and LSEₛ = m + log l the log-sum-exp of its scores. ' +
      'The merge puts the partials on one scale with wₛ = exp(LSEₛ − LSE), LSE the whole row\'s: the same algebra as the online softmax\'s rescale α = exp(m_old − m_new), ' +
      'which re-weighs what was summed under an older max. Here the old scale is each split\'s own LSEₛ, the new one the row\'s, and since Σₛ exp(LSEₛ) = exp(LSE) the weights sum to 1.';
    this.checks.replaceChildren(...(st.held ? [this.heldLine()] : this.checkLines(st)));
  }

  drawTable(h, st, r, now) {
    const t = this.table;
    t.replaceChildren();
    const cols = Math.min(COLS, h.D);
    const head = t.createTHead().insertRow();
    const heads = [['split', ''], ['keys', 'the keys the split owns (hover: the kv-tiles its block walked)'], ['LSEₛ', 'the split\'s log-sum-exp, from its end (the trace\'s)'],
      ['wₛ', 'the weight exp(LSEₛ − LSE), from its merge record (the trace\'s)'], ['check', 'exp(LSEₛ − LSE) worked out here from the two LSEs the trace holds: a check, not the kernel\'s number'],
      [h.D > cols ? `Oₛ, columns 0–${cols - 1} of ${h.D}` : 'Oₛ', 'the split\'s partial O, divided by its own l (the trace\'s)']];
    for (const [name, title] of heads) head.appendChild(el('th', { scope: 'col', title }, name));
    t.createCaption().textContent = 'LSEₛ, wₛ and O are the trace\'s numbers; wₛ = exp(LSEₛ − LSE), LSE the whole row\'s; the check column works wₛ out again from the two LSEs.';
    const body = t.createTBody();
    const cell = (tr, v, testid, cls = '') => {
      const td = tr.insertCell();
      if (testid) td.dataset.testid = testid;
      if (v === HELD) {
        td.textContent = '?';
        td.title = HELD_TITLE;
        td.classList.add('held');
      } else if (typeof v === 'number') {
        td.textContent = fmt(v, 6);
        td.title = String(v);
        td.dataset.value = String(v);
        if (v === -Infinity) td.classList.add('neginf');
      } else td.textContent = v;
      if (cls) td.classList.add(cls);
      return td;
    };
    const oCells = (o) => (o ? Array.from(o.subarray(0, cols), (v) => fmt(v, 4)).join('  ') + (h.D > cols ? '  …' : '') : '');
    for (const p of st.splits) {
      const tr = body.insertRow();
      tr.dataset.testid = `merge-split-${p.s}`;
      if (p.s === now) tr.classList.add('current');
      cell(tr, `${p.s}`);
      const walked = p.walked ? (p.walked[0] === p.walked[1] ? `kv-tile ${p.walked[0]}` : `kv-tiles ${p.walked[0]}–${p.walked[1]}`) : '';
      const td = cell(tr, p.keys ? `${p.keys[0]}–${p.keys[1]}` : '?');
      if (p.ended) td.title = walked ? `walked ${walked}` : 'walked none of them (the causal mask)';
      if (!p.ended) {
        cell(tr, 'not ended yet', `merge-lse-${p.s}`, 'pending');
        cell(tr, '', `merge-w-${p.s}`);
        cell(tr, '');
        cell(tr, '');
        continue;
      }
      cell(tr, p.lse, `merge-lse-${p.s}`);
      if (p.merged) cell(tr, st.held ? HELD : p.w, `merge-w-${p.s}`);
      else cell(tr, st.mergedThrough < 0 ? 'after the merge' : 'not merged yet', `merge-w-${p.s}`, 'pending');
      if (p.merged && st.held) cell(tr, HELD, `merge-wcheck-${p.s}`, 'check');
      else if (p.merged && p.wCheck !== null) cell(tr, p.wCheck, `merge-wcheck-${p.s}`, 'check');
      else cell(tr, '');
      cell(tr, oCells(p.o), `merge-o-${p.s}`, 'vec');
    }
    const foot = t.createTFoot();
    if (st.mergedThrough >= 0) {
      const tr = foot.insertRow();
      tr.dataset.testid = 'merge-merged';
      cell(tr, st.mergedThrough === st.layout.splits - 1 ? 'O, merged' : `O, splits 0–${st.mergedThrough}`);
      cell(tr, `0–${h.N - 1}`);
      cell(tr, st.held ? HELD : st.lse, 'merge-lse-row');
      const sum = cell(tr, st.held ? HELD : st.wSum, 'merge-wsum');
      if (!st.held) sum.title = `Σ wₛ over the splits merged so far: ${st.wSum}`;
      cell(tr, 'Σ wₛ so far', '', 'check');
      cell(tr, st.held ? HELD : oCells(st.merged), 'merge-o-merged', 'vec');
    }
    if (st.held?.final) {
      const tr = foot.insertRow();
      tr.dataset.testid = 'merge-final';
      cell(tr, 'O, epilogue');
      cell(tr, '');
      cell(tr, HELD, 'merge-lse-final');
      cell(tr, '');
      cell(tr, '');
      cell(tr, HELD, 'merge-o-final', 'vec');
    } else if (st.final) {
      const tr = foot.insertRow();
      tr.dataset.testid = 'merge-final';
      cell(tr, 'O, epilogue');
      cell(tr, '');
      cell(tr, st.finalLSE, 'merge-lse-final');
      cell(tr, '');
      cell(tr, '');
      cell(tr, oCells(st.final), 'merge-o-final', 'vec');
    }
  }

  // drawStrip draws every column of each split's Oₛ and of the merged O
  // so far (blank where not yet written), on one colour scale.
  // A held merge leaves the merged row blank ("?" once a merge is
  // reached), on the partials' scale alone, which bounds every merged O.
  drawStrip(m, h, st, r) {
    const S = st.layout.splits, D = h.D;
    const values = new Float32Array((S + 1) * D).fill(NaN);
    st.splits.forEach((p) => { if (p.o) values.set(p.o, p.s * D); });
    if (st.merged) values.set(st.merged, S * D);
    const max = st.held ? m.maxAbs(r.bh, 'o', 'split_end') : Math.max(m.maxAbs(r.bh, 'o', 'split_end'), m.maxAbs(r.bh, 'o', 'merge'));
    const label = (x) => (x < S ? `O${sub(x)}` : 'O');
    const held = st.held?.merged ? (x) => x === S : undefined;
    this.strip.draw({ values, rows: S + 1, cols: D, rowsValid: S + 1, colsValid: D, scale: 'diverging', max, name: 'partials', rowIndex: label, held });
    this.strip.scaleBar.prepend(`rows: O₀ … O${sub(S - 1)}, then the merged O so far; `);
  }

  // heldLine stands for the checks while the merge is held: each would
  // give it away.
  heldLine() {
    const span = el('span', { className: 'check-line held' }, 'The merge\'s weights, LSE, O and their checks show once you have answered the checkpoint.');
    span.dataset.testid = 'check-held';
    return span;
  }

  // checkLines are the checks, each named a check: worked out here in
  // float64 from the trace's own numbers, never in their place.
  checkLines(st) {
    const lines = [];
    const line = (testid, text) => {
      const span = el('span', { className: 'check-line' }, text);
      span.dataset.testid = testid;
      lines.push(span);
    };
    if (st.lseCheck !== null && st.lse !== null) {
      line('check-lse', `Check: log Σₛ exp(LSEₛ) from the splits' LSEₛ = ${fmt(st.lseCheck, 7)}; the merge's LSE = ${fmt(st.lse, 7)}.`);
    }
    if (st.mergedThrough === st.layout.splits - 1 && st.wSum !== null) {
      line('check-wsum', `Check: Σ wₛ = ${st.wSum.toFixed(7)} (the weights of a row sum to 1; off by ${fmt(Math.abs(st.wSum - 1), 2)}).`);
    }
    if (st.finalDiff !== null) {
      line('check-final', st.finalDiff === 0 ? 'Check: the epilogue\'s O is the last merge\'s O, column for column.'
        : `Check: the epilogue's O lies within ${fmt(st.finalDiff, 3)} of the last merge's O.`);
    }
    return lines;
  }
}
