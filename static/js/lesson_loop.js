// The debugging lesson's loop widget: the tiled-attention loop of one q-tile run on
// the server (GET /api/loop) correctly and with the slips switched on, the
// two side by side per kv-tile for one row, every number that differs
// marked, and the kv-tile where they first part named. Switching a slip off
// is fixing that line: the two runs then agree.
//
// Where a checkpoint asks where the loops part, the widget first shows the
// correct loop alone: the slipped loop's numbers wait until the student
// runs it (a button) or has answered the checkpoint, so that the table
// does not answer the question before it is asked. Where a checkpoint
// asks for the slipped loop's l, its l waits in the same way for that one,
// and the rest shows once the first is answered.
import { fmt } from './playground.js';
import { apiFetch } from './site.js';

const SLIPS = [
  { id: 'p-overwrite', label: '(a) the new row sum lands in P, not l',
    wrong: 'P = α·l + rowsum(P)      ← P now holds the sum', right: 'l = α·l + rowsum(P)' },
  { id: 'stale-max', label: '(b) the previous max is refreshed once per q-tile',
    wrong: 'α = exp(m_prev − m_new)  ← m_prev only set after the loop', right: 'α = exp(m − m_new)' },
  { id: 'no-divide', label: '(c) O is never divided by l',
    wrong: 'O_i = O                  ← no division', right: 'O_i = O / l' },
];

// unsettled are the checkpoints about a widget (its figure's
// data-asked-by) not yet answered or given up on this page: answered
// before (the progress kept in this browser), they wait for nothing.
export function unsettled(root) {
  const settled = (document.body.dataset.settled || '').split(',');
  const asked = root.closest('figure')?.dataset.askedBy || '';
  return new Set(asked.split(',').filter((id) => id && !settled.includes(id)));
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

// OCOLS is how many of O's columns the table shows.
export const OCOLS = 2;

const num = (a) => a.map(Number); // "Infinity", "-Infinity" and "NaN" arrive as strings
const same = (a, b) => a === b || (Number.isNaN(a) && Number.isNaN(b));

// listing is the loop in the lesson's own pseudo-code, each slipped line
// shown as the slip writes it while its slip is on.
function listing(on) {
  const line = (s) => {
    const slip = SLIPS.find((x) => x.id === s);
    const bad = on.includes(s);
    return el('span', { class: bad ? 'slipped' : 'fixed', text: `${bad ? slip.wrong : slip.right}\n` });
  };
  return el('pre', { class: 'loop-code' },
    'm = −inf, l = 0, O = 0\nfor each kv-tile j:\n  S = Q_i K_jᵀ · scale\n  m_new = max(m, rowmax(S))\n  ', line('stale-max'),
    '  P = exp(S − m_new)\n  ', line('p-overwrite'),
    '  O = α·O + P·V_j\n  m = m_new\n', line('no-divide'));
}

class LoopWidget {
  constructor(root) {
    this.root = root;
    this.query = root.dataset.query;
    this.slips = root.dataset.slips ? root.dataset.slips.split(',') : [];
    this.row = Number(root.dataset.row);
    // Checkpoints answered before (the progress kept in this browser) wait
    // for nothing. A choice about the loop asks where it parts, and holds
    // every slipped number back (held); a number asks for the slipped
    // loop's l (the lessons' ask=loop-l, the one numeric ask on the loop),
    // and holds its l back (heldL).
    const waiting = [...unsettled(root)];
    const numeric = (id) => document.getElementById(id)?.dataset.format === 'number';
    this.waitParts = new Set(waiting.filter((id) => !numeric(id)));
    this.waitL = new Set(waiting.filter(numeric));
    this.held = this.waitParts.size > 0;
    this.heldL = this.waitL.size > 0;
    document.addEventListener('flashstep-settled', (ev) => {
      const id = ev.detail.checkpoint;
      let changed = false;
      if (this.waitParts.delete(id) && this.waitParts.size === 0) { this.held = false; changed = true; }
      if (this.waitL.delete(id) && this.waitL.size === 0) { this.heldL = false; changed = true; }
      if (changed) this.redraw();
    });
    const switches = el('fieldset', { class: 'loop-slips' }, el('legend', { text: 'Slips in the loop (untick one to fix that line)' }));
    for (const s of SLIPS) {
      const box = el('input', { type: 'checkbox', value: s.id, 'data-testid': `slip-${s.id}` });
      box.checked = this.slips.includes(s.id);
      box.addEventListener('change', () => {
        this.slips = SLIPS.map((x) => x.id).filter((id) => switches.querySelector(`[value="${id}"]`).checked);
        this.load();
      });
      switches.append(el('label', {}, box, ` ${s.label}`));
    }
    this.rowSelect = el('select', { 'aria-label': 'row' });
    this.rowSelect.addEventListener('change', () => { this.row = Number(this.rowSelect.value); this.draw(); });
    this.code = el('div');
    this.status = el('p', { class: 'loop-status', 'aria-live': 'polite', 'data-testid': 'loop-status' });
    this.table = el('table', { class: 'loop-table' });
    this.runButton = el('button', { type: 'button', class: 'button', 'data-testid': 'loop-run-slipped', text: 'Run the slipped loop' });
    this.runButton.hidden = !this.held && !this.heldL;
    this.runButton.addEventListener('click', () => this.unhold());
    root.replaceChildren(el('div', { class: 'loop-top' }, switches, this.code),
      el('div', { class: 'loop-row' }, el('label', {}, 'row ', this.rowSelect), this.runButton), this.status, el('div', { class: 'loop-scroll', tabindex: '0', role: 'region', 'aria-label': `The two loops' numbers, kv-tile by kv-tile (${root.closest('figure')?.id || 'loop'})` }, this.table));
    this.load();
  }

  unhold() {
    this.held = this.heldL = false;
    this.redraw();
  }

  redraw() {
    this.runButton.hidden = !this.held && !this.heldL;
    this.draw();
  }

  async load() {
    this.code.replaceChildren(listing(this.slips));
    let res;
    try {
      res = await apiFetch(`/api/loop?${this.query}&slip=${this.slips.join(',')}`);
      this.data = await res.json();
    } catch (err) {
      this.status.textContent = `The server could not be reached: ${err.message}`;
      return;
    }
    if (!res.ok) {
      this.status.textContent = this.data.error || `The server answered ${res.status}.`;
      return;
    }
    const d = this.data;
    this.rowSelect.replaceChildren(...Array.from({ length: d.rows }, (_, r) => {
      const o = el('option', { value: String(r), text: `${d.first_row + r} (row ${r} of q-tile ${d.q})` });
      o.selected = r === this.row;
      return o;
    }));
    this.draw();
  }

  draw() {
    const d = this.data;
    if (!d) return;
    const r = Math.min(this.row, d.rows - 1);
    const part = d.parts[r];
    // O's first two columns: enough to see the loops part, and the table
    // fits a lesson's column.
    const show = Math.min(d.d, OCOLS);
    // Each kv-tile takes two lines, the correct loop's numbers over the
    // slipped loop's (✗), so that a column holds one quantity and the
    // table stays narrow enough for the lesson's column.
    const head = ['kv-tile', 'loop', 'm', 'α', 'l'];
    for (let x = 0; x < show; x++) head.push(`O[${x}]`);
    const thead = el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { text: h, scope: 'col' }))));
    const tbody = el('tbody');
    const pair = (good, bad, a, b, isL = false) => {
      good.append(el('td', { text: fmt(a) }));
      if (this.held || (isL && this.heldL)) bad.append(el('td', { text: '?', class: 'held' }));
      else bad.append(el('td', { text: fmt(b), class: same(a, b) ? '' : 'parted' }));
    };
    const lines = (label, cls) => {
      const good = el('tr', { class: `correct ${cls}`.trim() });
      const bad = el('tr', { class: `slipped ${cls}`.trim() });
      good.append(el('th', { rowspan: '2', scope: 'rowgroup', text: label }), el('td', { class: 'which', text: 'correct' }));
      bad.append(el('td', { class: 'which', text: '✗ slipped' }));
      tbody.append(good, bad);
      return [good, bad];
    };
    d.correct.steps.forEach((st, k) => {
      const sl = d.slipped.steps[k];
      const [good, bad] = lines(String(st.kv), part.kv === st.kv && !this.held ? 'first-part' : '');
      good.dataset.kv = bad.dataset.kv = String(st.kv);
      pair(good, bad, num(st.m)[r], num(sl.m)[r]);
      pair(good, bad, num(st.alpha)[r], num(sl.alpha)[r]);
      pair(good, bad, num(st.l)[r], num(sl.l)[r], true);
      const o = num(st.o);
      const so = num(sl.o);
      for (let x = 0; x < show; x++) pair(good, bad, o[r * d.d + x], so[r * d.d + x]);
    });
    const [good, bad] = lines('output', part.kv < 0 && part.output && !this.held ? 'output first-part' : 'output');
    good.append(el('td', { colspan: '3', class: 'which', text: 'O / l' }));
    bad.append(el('td', { colspan: '3', class: 'which', text: 'as the slipped loop writes it' }));
    const co = num(d.correct.out);
    const so = num(d.slipped.out);
    for (let x = 0; x < show; x++) pair(good, bad, co[r * d.d + x], so[r * d.d + x]);
    const cols = show < d.d ? ` (O's first ${show} of its ${d.d} columns)` : '';
    this.table.replaceChildren(el('caption', { text: `Row ${d.first_row + r}: after each kv-tile, the correct loop's numbers, and under them (✗) the loop's with the slips ticked${cols}` }), thead, tbody);

    if (!d.slipped.slips || d.slipped.slips.length === 0) {
      this.status.textContent = 'No slip is on: the two loops are the same loop, and every number agrees.';
    } else if (this.held) {
      this.status.textContent = 'The correct loop, kv-tile by kv-tile. Read the listing and predict where the slipped loop parts from it (the checkpoint below), then run it.';
    } else if (part.kv >= 0) {
      this.status.textContent = `The numbers part after kv-tile ${part.kv}, first in ${part.what}: m, l and O agree at every kv-tile before it${alphaFirst(d, r, part.kv) ? ' (α differs earlier, but α·l rounds away next to the new tile\'s sum)' : ''}.`;
    } else if (part.output) {
      this.status.textContent = 'm, l and O agree after every kv-tile; they part only in the output.';
    } else {
      this.status.textContent = 'On this row the slips change nothing.';
    }
    if (this.heldL && !this.held && d.slipped.slips?.length) {
      this.status.textContent += ' The slipped loop\'s l shows once you have answered the checkpoint that asks for it, or run the slipped loop.';
    }
    this.root.dataset.part = this.held ? 'held' : part.kv >= 0 ? String(part.kv) : part.output ? 'output' : 'never';
  }
}

// alphaFirst says whether row r's α differs between the loops at a
// kv-tile before the one where m, l or O first part.
function alphaFirst(d, r, kv) {
  return d.correct.steps.some((st, k) => st.kv < kv && !same(num(st.alpha)[r], num(d.slipped.steps[k].alpha)[r]));
}

export function initLoopWidgets() {
  for (const root of document.querySelectorAll('.loop-widget[data-query]')) new LoopWidget(root);
}
