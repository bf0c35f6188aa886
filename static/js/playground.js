// The online-softmax playground: one row of logits the student types or
// drags, split into tiles; the running max m, the running sum l and the
// rescale factor α per tile, beside the exact softmax. Switches: the max
// subtraction, the tile width, and the type every intermediate is rounded
// to. It runs on /playground and wherever a lesson places
// `::: playground`; each .playground element carries its starting
// settings in data-settings.
import { run, dtypes } from './playground_math.js';
import { siteURL } from './site.js';

const MAX_LOGITS = 32; // lessons/playground.MaxLogits
const MAX_ABS = 1e5; // lessons/playground.MaxAbsLogit

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

// fmt writes a number so that inf and NaN stand out and small weights
// keep their digits.
export function fmt(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '−inf';
  if (x === 0) return '0';
  const a = Math.abs(x);
  const s = a >= 1e5 || a < 1e-3 ? x.toExponential(3) : String(Number(x.toPrecision(5)));
  return s.replace('-', '−');
}

// cell is a table cell of a number: inf and NaN stand out as the errors
// they are; −inf (the running max before its first tile) is ordinary and
// keeps a calm colour of its own.
function cell(x, testid) {
  const td = el('td', { text: fmt(x) });
  if (!Number.isFinite(x)) td.className = Number.isNaN(x) ? 'nan' : x < 0 ? 'neginf' : 'inf';
  if (testid) td.dataset.testid = testid;
  return td;
}

class Playground {
  constructor(root) {
    this.root = root;
    this.standalone = root.dataset.standalone === '1';
    // In a lesson whose checkpoints ask where l overflows, the status line
    // does not say it until they are answered: the student predicts, then
    // reads the table.
    const asked = root.closest('figure')?.dataset.askedBy || '';
    const settled = (document.body.dataset.settled || '').split(',');
    this.waitingFor = new Set(asked.split(',').filter((id) => id && !settled.includes(id)));
    document.addEventListener('flashstep-settled', (ev) => {
      if (this.waitingFor.delete(ev.detail.checkpoint) && this.waitingFor.size === 0) this.update();
    });
    const s = JSON.parse(root.dataset.settings);
    this.s = { logits: s.logits.slice(), tile: s.tile, max: s.max, dtype: s.dtype };
    this.build();
    this.update();
  }

  build() {
    const id = this.root.id || 'pg';
    const dtype = el('fieldset', { class: 'pg-dtype' }, el('legend', { text: 'every intermediate in' }));
    for (const [key, d] of Object.entries(dtypes)) {
      const input = el('input', { type: 'radio', name: `${id}-dtype`, value: key });
      input.checked = key === this.s.dtype;
      input.addEventListener('change', () => { this.s.dtype = key; this.update(); });
      dtype.append(el('label', {}, input, ` ${d.name}`));
    }
    const maxBox = el('input', { type: 'checkbox', 'data-testid': 'pg-max' });
    maxBox.checked = this.s.max;
    maxBox.addEventListener('change', () => { this.s.max = maxBox.checked; this.update(); });
    this.tileInput = el('input', { type: 'number', min: '1', value: String(this.s.tile), 'data-testid': 'pg-tile' });
    this.tileInput.addEventListener('input', () => {
      const t = Number(this.tileInput.value);
      if (Number.isInteger(t) && t >= 1 && t <= this.s.logits.length) { this.s.tile = t; this.update(); }
    });
    const add = el('button', { type: 'button', class: 'button', text: '+ logit' });
    add.addEventListener('click', () => {
      if (this.s.logits.length < MAX_LOGITS) { this.s.logits.push(0); this.rebuildRow(); this.update(); }
    });
    const remove = el('button', { type: 'button', class: 'button', text: '− logit' });
    remove.addEventListener('click', () => {
      if (this.s.logits.length > 1) {
        this.s.logits.pop();
        this.s.tile = Math.min(this.s.tile, this.s.logits.length);
        this.rebuildRow();
        this.update();
      }
    });
    const controls = el('div', { class: 'pg-controls' },
      dtype,
      el('label', { class: 'pg-switch' }, maxBox, ' subtract the running max'),
      el('label', {}, 'tile width ', this.tileInput),
      add, remove);
    this.row = el('div', { class: 'pg-row', 'data-testid': 'pg-row' });
    this.status = el('p', { class: 'pg-status', 'aria-live': 'polite', 'data-testid': 'pg-status' });
    this.tilesTable = el('table', { class: 'pg-tiles' });
    this.weightsTable = el('table', { class: 'pg-weights' });
    this.link = el('a', { class: 'pg-link' });
    const key = el('p', { class: 'pg-key' },
      el('span', {}, el('i', { class: 'neginf' }), '−inf: no logit seen yet (m before the first tile); normal'),
      el('span', {}, el('i', { class: 'inf' }), 'inf, NaN: overflow; an error'));
    this.root.replaceChildren(controls, this.row, this.status,
      el('div', { class: 'pg-tables' }, this.scrolls(this.tilesTable, 'Per tile'), this.scrolls(this.weightsTable, 'Per logit')), key, this.link);
    this.rebuildRow();
  }

  // scrolls puts a table in a box that scrolls it sideways where it is
  // wider than the page, and that a keyboard can reach to scroll it.
  scrolls(table, label) {
    return el('div', { class: 'pg-scroll', tabindex: '0', role: 'region', 'aria-label': label }, table);
  }

  // rebuildRow makes one column per logit: a bar to drag and a field to type in.
  rebuildRow() {
    this.row.replaceChildren();
    this.bars = [];
    this.inputs = [];
    this.s.logits.forEach((x, k) => {
      const bar = el('div', { class: 'pg-bar' });
      const track = el('div', { class: 'pg-track', title: 'drag to change the logit' }, bar);
      const input = el('input', { type: 'number', step: 'any', value: String(x), 'aria-label': `logit ${k}`, 'data-testid': `pg-logit-${k}` });
      input.addEventListener('input', () => {
        const v = Number(input.value);
        if (input.value.trim() !== '' && Number.isFinite(v) && Math.abs(v) <= MAX_ABS) {
          input.classList.remove('bad');
          this.s.logits[k] = v;
          this.update();
        } else {
          input.classList.add('bad');
        }
      });
      this.drag(track, k, input);
      this.bars.push(bar);
      this.inputs.push(input);
      this.row.append(el('div', { class: 'pg-col' }, track, input, el('span', { class: 'pg-index', text: String(k) })));
    });
  }

  // drag sets a logit from the pointer's height in its track; the scale is
  // held for the whole drag so the bar stays under the pointer.
  drag(track, k, input) {
    let range = 0;
    const at = (ev) => {
      const box = track.getBoundingClientRect();
      const frac = 1 - 2 * (ev.clientY - box.top) / box.height;
      const v = Math.round(Math.max(-1, Math.min(1, frac)) * range * 10) / 10;
      this.s.logits[k] = v;
      input.value = String(v);
      input.classList.remove('bad');
      this.update(range);
    };
    track.addEventListener('pointerdown', (ev) => {
      range = this.range();
      track.setPointerCapture(ev.pointerId);
      at(ev);
    });
    track.addEventListener('pointermove', (ev) => { if (track.hasPointerCapture(ev.pointerId)) at(ev); });
    track.addEventListener('pointerup', (ev) => { track.releasePointerCapture(ev.pointerId); this.update(); });
  }

  range() {
    const big = Math.max(...this.s.logits.map(Math.abs));
    return Math.max(12, Math.ceil(big / 4) * 4);
  }

  update(fixedRange) {
    const s = this.s;
    const r = run(s);
    const range = fixedRange || this.range();
    // Bars: up from the middle for positive logits, down for negative;
    // tiles alternate their shade.
    s.logits.forEach((x, k) => {
      const h = Math.min(Math.abs(x) / range, 1) * 50;
      const bar = this.bars[k];
      bar.style.height = `${h}%`;
      bar.style.top = x >= 0 ? `${50 - h}%` : '50%';
      bar.parentElement.parentElement.className = `pg-col tile-${Math.floor(k / s.tile) % 2}` +
        (!Number.isFinite(r.weights[k]) ? ' broken' : '');
    });

    const tiles = this.tilesTable;
    tiles.replaceChildren(el('caption', { text: `Per tile, in ${dtypes[s.dtype].name}` }),
      el('thead', {}, el('tr', {}, ...['tile', 'logits', 'm_old', 'tile max', 'm_new', 'α', 'l'].map((h) => el('th', { text: h })))));
    const tb = el('tbody');
    r.tiles.forEach((t, j) => {
      tb.append(el('tr', {}, el('th', { text: String(j) }), el('td', { text: `${t.start}–${t.end - 1}` }),
        cell(t.mOld), cell(t.mTile), cell(t.mNew, `pg-m-${j}`), cell(t.alpha, `pg-alpha-${j}`), cell(t.l, `pg-l-${j}`)));
    });
    tiles.append(tb);

    const w = this.weightsTable;
    w.replaceChildren(el('caption', { text: 'Per logit: the online result against the exact softmax (float64)' }),
      el('thead', {}, el('tr', {}, ...['logit', 'typed', `as ${dtypes[s.dtype].name}`, s.max ? 'exp(s − m)' : 'exp(s)', 'online', 'exact', 'online − exact'].map((h) => el('th', { text: h })))));
    const wb = el('tbody');
    const ps = r.tiles.flatMap((t) => t.p);
    r.weights.forEach((x, k) => {
      wb.append(el('tr', {}, el('th', { text: String(k) }), cell(s.logits[k]), cell(r.stored[k]), cell(ps[k], `pg-p-${k}`),
        cell(x, `pg-w-${k}`), cell(r.exact[k]), cell(x - r.exact[k], `pg-diff-${k}`)));
    });
    w.append(wb);

    const name = dtypes[s.dtype].name;
    const nan = r.weights.filter(Number.isNaN).length;
    if (r.firstInf >= 0) {
      const why = r.firstExpInf === r.firstInf
        ? `exp(${fmt(r.stored[r.firstInf])}) is past ${name}'s largest value`
        : `the sum passes ${name}'s largest value, though no single exp does`;
      this.status.textContent = this.waitingFor.size > 0
        ? `l becomes inf in ${name}: every weight is then exp(·)/inf, NaN or 0. At which logit? Predict it in the checkpoint below, then read the l row of the table.`
        : `l becomes inf at logit ${r.firstInf}: ${why}. ` +
          `Every weight is then exp(·)/inf: ${nan} NaN (inf/inf), the rest 0.`;
      this.status.className = 'pg-status bad';
    } else if (nan > 0) {
      this.status.textContent = `${nan} weight${nan > 1 ? 's are' : ' is'} NaN: a logit is inf in ${name}, and inf − inf is NaN.`;
      this.status.className = 'pg-status bad';
    } else {
      const worst = Math.max(...r.weights.map((x, k) => Math.abs(x - r.exact[k])));
      this.status.textContent = `l stays finite. The online weights differ from the exact softmax by at most ${fmt(worst)}: ${name} rounding, nothing else.`;
      this.status.className = 'pg-status';
    }

    const q = `logits=${s.logits.join(',')}&tile=${s.tile}&max=${s.max ? 'on' : 'off'}&dtype=${s.dtype}`;
    if (this.standalone) {
      history.replaceState(null, '', siteURL(`/playground?${q}`));
      this.link.hidden = true;
    } else {
      this.link.href = siteURL(`/playground?${q}`);
      this.link.textContent = 'open this row in the playground ↗';
    }
    this.tileInput.max = String(s.logits.length);
    this.tileInput.value = String(s.tile);
    this.root.dataset.ready = '1';
  }
}

export function initPlaygrounds() {
  for (const root of document.querySelectorAll('.playground[data-settings]')) {
    if (!root.dataset.ready) new Playground(root);
  }
}
