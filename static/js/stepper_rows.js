// The stepper's rows table: per row of the step's q-tile, the online
// softmax's running max m, rescale α and sum l (or what the step's kind
// has instead: naive's full-row max and sum, pass 1's max so far, the
// epilogue's LSE), in the words the reader knows, with the numbers a
// lesson's checkpoint asks held back as "?".
import { fmt, tex } from './format.js';
import { materialises } from './steps.js';
import { rung } from './rungs.js';
import { $, holds, kindHolds, know, state, views } from './stepper_page.js';
import { mergeHolds } from './holds.js';
import { ROW_HEADS } from './formulas.js';
import { rowsName } from './shape.js';
import { splitOfStep, startsSplit } from './splits.js';
import { sub } from './steps.js';

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


// tilesUnreadable says whether the S and P tiles shown print no numbers
// in their cells (too many columns for the room: a 64-key tile): the rows
// table then gives what a student needs of them, each row's largest score
// and its sum of p in the tile.
function tilesUnreadable() {
  const shown = ['s', 'p'].filter((v) => !$(`${v}-tile`).closest('[data-panel]').hidden);
  return shown.length > 0 && shown.every((v) => views[v].canvas.dataset.fontPx === '0');
}

// splitColumns are the rows table's columns on a split-KV trace's split
// end (the split's last m and l, from its last flash step, and its
// LSE_s), merge (LSE_s from the split's end, the row's LSE and w_s from the
// merge record) and epilogue (the LSE: the merge keeps no running m or l).
// Every number is a record's.
function splitColumns(h, m, r, addCol, note) {
  const key = `${r.bh},${r.i}`;
  if (r.kind === 'split_end') {
    const walked = m.splitSteps.get(key)?.[r.j] ?? [];
    const last = walked.length ? m.steps[walked.at(-1)] : null;
    if (last) {
      addCol('m', 'm-new', (x) => last.m_new[x]);
      addCol('l', 'l', (x) => last.l[x]);
    } else note.textContent = `Split ${r.j}'s block walked none of its kv-tiles (the causal mask): no m or l, and LSE${sub(r.j)} = −∞.`;
    addCol('lseS', 'lse-s', (x) => r.lse[x]);
    return;
  }
  if (r.kind === 'merge') {
    const endK = m.splitEnds.get(key)?.[r.j];
    const end = endK !== undefined ? m.steps[endK] : null;
    if (end) addCol('lseS', 'lse-s', (x) => end.lse[x]);
    addCol('lseRow', 'lse', (x) => r.lse[x]);
    addCol('w', 'w', (x) => r.w[x]);
    return;
  }
  addCol('lseRow', 'lse', (x) => r.lse[x]);
  note.textContent = 'The merge keeps no running m or l: each row\'s LSE = log Σₛ exp(LSEₛ) over the splits (the merge view has each split\'s).';
}

export function drawRows(h, m, r) {
  const online = know.knows('online');
  $('rows-caption').textContent = !online ? 'Per row of this step: the keys it has met'
    : rung(h.variant)?.rows_caption ? rung(h.variant).rows_caption
      : 'Online softmax, per row of the q-tile';
  const table = $('rows');
  table.replaceChildren();
  const note = $('rows-note');
  note.textContent = '';
  if (r.kind === 'timing') return;
  if (online && m.hasSplits) {
    const s = splitOfStep(m, state.k);
    if (r.kind === 'flash_step' && s >= 0) $('rows-caption').textContent = `Online softmax of split ${s}, per row of the q-tile`;
    else if (r.kind === 'split_end') $('rows-caption').textContent = `Split ${s}'s end, per row: its last m and l, and LSE${sub(s)}`;
    else if (r.kind === 'merge') $('rows-caption').textContent = `The merge, per row: split ${s}'s weight`;
    else if (r.kind === 'epilogue') $('rows-caption').textContent = 'The merged output, per row';
  }
  const head = table.createTHead().insertRow();
  const cols = [];
  const addCol = (name, testid, get, cls) => cols.push({ name, testid, get, cls });
  addCol('row', 'row', (x) => r.i * h.Br + x);
  if (!online) {
    // Lessons 1–4 know the rows and the keys each has been scored against
    // (of the N keys, whatever the rows); the running max and sum that go
    // with them are lesson 5's.
    const seen = r.kind === 'flash_step' || r.kind === 'scores' ? Math.min(h.N, (r.j + 1) * h.Bc) : h.N;
    addCol('keys', 'keys', () => (seen === h.N ? `all ${h.N}` : `0–${seen - 1}`));
    note.textContent = `The running max m, the running sum l and the rescale α of each row: ${know.lesson('online')}.`;
  } else if (m.hasSplits && (r.kind === 'split_end' || r.kind === 'merge' || r.kind === 'epilogue')) {
    splitColumns(h, m, r, addCol, note);
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
    if (m.hasSplits && startsSplit(m, state.k)) {
      // The state the step starts from is the empty one: the kv-tile
      // before belonged to the split before, whose block ended on its own.
      const s = splitOfStep(m, state.k);
      note.textContent = [`Split ${s} starts at this kv-tile: its block begins from m = −∞, l = 0 and O = 0, so m_old is −∞ and α multiplies nothing` +
        (s > 0 ? `; the m, l and O of the kv-tile before were split ${s - 1}'s, which ended with its own partial.` : '.'), note.textContent].filter(Boolean).join(' ');
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
      td.textContent = `row ${r.i * h.Br + x}: padding (past ${rowsName(h)}), not data`;
      continue;
    }
    // A forward run's held m, α and l (hold=bh.row.step), and a split-KV
    // run's held merge (hold=merge.…): the row's LSE and w on a merge, its
    // LSE on the epilogue; each split's LSEₛ, which the question gives,
    // shows.
    const row = r.i * h.Br + x;
    const hidden = new Set([...(holds(r, row) ?? []), ...(mergeHolds(kindHolds, r, row, state.k) ?? [])]);
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
