// The block table of a paged KV cache (pages.js), shown on every step of
// a paged rung's trace: the step's batch row's table (kv-tile j → page),
// the pool of pages with that row's pages marked, and the page the step
// reads lit in both, with the address it reads K_j and V_j from. Built
// into the page's views by the stepper when a trace is paged.
import { batchRowOf, kvHeadOf, pageTable, poolPages } from './pages.js';
import { splitOfTile } from './splits.js';
import { sub } from './steps.js';

// POOL_CELLS is the most pages the pool strip draws one by one.
const POOL_CELLS = 512;

const el = (tag, props = {}, ...kids) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
};

// PageTableView owns the panel: a figure among the key views, which the
// page's style shows below them while the views box has the class paged.
export class PageTableView {
  constructor(views) {
    this.figure = el('figure', { className: 'view pages-view' });
    this.figure.dataset.panel = 'pages';
    this.figure.dataset.testid = 'panel-pages';
    this.caption = el('figcaption', { id: 'pages-caption' }, 'The block table');
    this.table = el('ol', { className: 'page-table', id: 'page-table' });
    this.table.dataset.testid = 'page-table';
    this.table.setAttribute('aria-label', 'The block table: the page of each kv-tile');
    this.pool = el('ol', { className: 'page-pool', id: 'page-pool' });
    this.pool.dataset.testid = 'page-pool';
    this.pool.setAttribute('aria-label', 'The pool of pages');
    this.note = el('p', { className: 'rows-note', id: 'pages-note' });
    this.note.dataset.testid = 'pages-note';
    this.figure.append(this.caption, el('p', { className: 'pages-label' }, 'Block table (kv-tile → page)'), this.table,
      el('p', { className: 'pages-label' }, 'Pool of pages'), this.pool, this.note);
    views.append(this.figure);
    this.views = views;
  }

  hide() { this.views.classList.remove('paged'); }

  // build draws sequence b's table and the pool once; a step then only
  // moves the marks (draw), so that stepping a long cache (2,048 kv-tiles at
  // 128k keys) does not rebuild thousands of cells a frame.
  build(h, b, table) {
    this.built = h;
    this.b = b;
    this.tableShown = table;
    this.marked = [];
    const where = new Map(table.map((p, j) => [p, j])); // page → its kv-tile in this sequence
    this.entries = table.map((p, j) => {
      const li = el('li', { className: 'page-entry' }, el('span', { className: 'page-j' }, `j=${j}`), el('span', { className: 'page-p' }, `page ${p}`));
      li.title = `kv-tile ${j} (keys ${j * h.Bc} to ${Math.min(h.N, (j + 1) * h.Bc) - 1}) lies in page ${p}`;
      return li;
    });
    this.table.replaceChildren(...this.entries);
    const shown = Math.min(poolPages(h), POOL_CELLS);
    this.cells = Array.from({ length: shown }, (_, p) => {
      const mine = where.has(p);
      const li = el('li', { className: 'pool-page' + (mine ? ' mine' : '') }, String(p));
      li.title = mine ? `page ${p}: kv-tile ${where.get(p)} of sequence ${b}` : `page ${p}: another sequence's`;
      return li;
    });
    this.pool.replaceChildren(...this.cells);
    this.caption.textContent = `The block table of sequence ${b} (batch row ${b})`;
  }

  // draw shows step k of model m: its batch row's table, the pool, and
  // the kv-tile the step reads (none on a split's end, a merge or the
  // epilogue).
  draw(m, k) {
    const h = m.h, r = m.steps[k];
    this.views.classList.add('paged');
    const b = batchRowOf(h, r.bh), hkv = kvHeadOf(h, r.bh);
    if (this.built !== h || this.b !== b) this.build(h, b, pageTable(h, b));
    const table = this.tableShown;
    for (const e of this.marked) e.classList.remove('current', 'in-split');
    this.marked = [];
    const mark = (e, cls) => { if (e) { e.classList.add(cls); this.marked.push(e); } };
    const reading = r.kind === 'flash_step' && r.j >= 0 ? r.j : -1;
    if (reading >= 0) {
      const split = m.splits ? splitOfTile(m.splits, reading) : -1;
      if (split >= 0) this.entries.forEach((e, j) => { if (splitOfTile(m.splits, j) === split) mark(e, 'in-split'); });
      mark(this.entries[reading], 'current');
      mark(this.cells[table[reading]], 'current');
    }
    const pages = poolPages(h), shown = this.cells.length;
    const more = pages > shown ? ` (the first ${shown} of its ${pages} pages drawn)` : '';
    if (reading >= 0) {
      const p = table[reading];
      this.note.textContent = `This step reads kv-tile ${reading} of sequence ${b}: the table says page ${p}, so K${sub(reading)} and V${sub(reading)} of K/V head ${hkv} come from pool + (${p}·${h.kvHeads} + ${hkv})·${h.Bc}·${h.D} elements, not from row ${reading * h.Bc} of one contiguous cache. ` +
        `Its sequence's ${table.length} pages are scattered over a pool of ${pages}${more}.`;
    } else {
      this.note.textContent = `The pool holds ${pages} pages${more}, a kv-tile of every K/V head each; sequence ${b}'s ${table.length} are marked. This step reads no page: ` +
        (r.kind === 'epilogue' || r.kind === 'merge' ? 'the merge reads the splits\' partials, which know nothing of pages.' : 'the split ends from what its steps read.');
    }
  }
}
