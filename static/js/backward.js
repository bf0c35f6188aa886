// The stepper's views of a backward run (kernels/flash2_bwd.go): the same
// panels as a forward run, holding what a backward step has. A kv-tile's
// block keeps K_j, V_j, dK_j and dV_j on chip and walks the q-tiles; each
// step recomputes S and P = exp(S − L) from Q_i, K_j and the forward's L,
// forms dP and dS, grows dK_j and dV_j, and adds its part into dQ_i in
// device memory.
//
// This module owns the drawing, with the numbers a lesson holds back
// (holds.js) as "?"; backward_model.js owns what a backward trace holds.
import { Heatmap } from './heatmap.js';
import { fmt, tex } from './format.js';
import { firstQTile, sub } from './steps.js';
import { rowsName } from './shape.js';
import { BACKWARD_HEADS } from './formulas.js';
import { isHeld } from './holds.js';
import { kindHolds } from './stepper_page.js';

// The numbers a lesson's checkpoint holds back (lessons.Hold, holds.js):
// psum.bh.row.step.id holds the row's sums of p, and its p in the P tile,
// at the steps of its q-tile after step (from 1), where they would tell
// what the later kv-tiles add; dq.bh.row.step.id holds the row's finished
// dQ from step, its q-tile's last pass, on. They show as "?" until
// checkpoint id is answered (the page's kindHolds, stepper_page.js, which
// lets them go and redraws the step).
const heldRow = (what, bh, row, k) => isHeld(kindHolds, what, bh, row, k);

// draw fills the stepper's panels for backward step r (the k-th): S and P
// recomputed, dS in the O panel, the rows' L, D and Σp in the table, and
// the block's dP, dV_j, dK_j and dQ part where the forward shows the
// finished O.
export function draw({ h, m, r, k, views, $ }) {
  const rowIndex = (x) => r.i * h.Br + x;
  const colIndex = (x) => r.j * h.Bc + x;
  const tile = (values, rows, cols, rowsValid, colsValid, name, extra = {}) => ({
    values, rows, cols, rowsValid, colsValid, name, rowIndex, ...extra,
  });
  // Input tiles: what the step reads from device memory.
  drawReads(h, m, r, $);

  if (r.kind === 'bwd_step') {
    $('s-caption').textContent = `S (${r.i}, ${r.j}) = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d, recomputed`;
    views.s.draw(tile(r.s, h.Br, h.Bc, r.rowsValid, r.colsValid, 'S',
      { scale: 'diverging', max: m.maxAbs(r.bh, 's'), colIndex, colWord: 'key', masked: '−∞: masked' }));
    $('p-caption').textContent = `P = exp(S − L${sub(r.i)}): final weights, no running max`;
    views.p.draw(tile(r.p, h.Br, h.Bc, r.rowsValid, r.colsValid, 'P', { scale: 'sequential', max: 1, colIndex, colWord: 'key',
      held: (x) => heldRow('psum', r.bh, rowIndex(x), k) }));
    $('o-caption').textContent = 'dS = P ∘ (dP − D)';
    views.o.draw(tile(r.ds, h.Br, h.Bc, r.rowsValid, r.colsValid, 'dS',
      { scale: 'diverging', max: m.maxAbs(r.bh, 'ds'), colIndex, colWord: 'key' }));
  } else if (r.kind === 'bwd_dp' || r.kind === 'bwd_kv') {
    // The naive backward never forms S: it reads the P the forward stored.
    $('s-caption').textContent = 'S tile';
    views.s.clear('The naive backward never forms S: the forward stored P.');
    if (r.kind === 'bwd_dp') {
      $('p-caption').textContent = 'P tile';
      views.p.clear('Phase 1 reads no P: phases 2 and 4 read it back.');
      $('o-caption').textContent = `dP (${r.i}, ${r.j}) = dO${sub(r.i)}V${sub(r.j)}ᵀ, written to device memory`;
      views.o.draw(tile(r.dp, h.Br, h.Bc, r.rowsValid, r.colsValid, 'dP', { scale: 'diverging', max: m.maxAbs(r.bh, 'dp'), colIndex, colWord: 'key' }));
    } else {
      $('p-caption').textContent = `P (${r.i}, ${r.j}), read back from device memory`;
      views.p.draw(tile(r.p, h.Br, h.Bc, r.rowsValid, r.colsValid, 'P', { scale: 'sequential', max: 1, colIndex, colWord: 'key' }));
      $('o-caption').textContent = `dS (${r.i}, ${r.j}), read back from device memory`;
      views.o.draw(tile(r.ds, h.Br, h.Bc, r.rowsValid, r.colsValid, 'dS', { scale: 'diverging', max: m.maxAbs(r.bh, 'ds'), colIndex, colWord: 'key' }));
    }
  } else {
    $('s-caption').textContent = 'S tile';
    $('p-caption').textContent = 'P tile';
    const why = r.kind === 'bwd_pre' ? 'Preprocessing reads no K or V: no S or P yet.'
      : r.kind === 'bwd_ds' ? 'Phase 2 reads whole rows of P and dP, not tiles.' : 'dQ is finished: no S or P in this step.';
    views.s.clear(why);
    views.p.clear(why);
    if (r.kind === 'bwd_pre') {
      $('o-caption').textContent = `O${sub(r.i)}, the forward's output, read`;
      views.o.draw(tile(r.o, h.Br, h.D, r.rowsValid, h.D, 'O', { scale: 'diverging', max: m.maxAbs(r.bh, 'o') }));
    } else if (r.kind === 'bwd_ds') {
      $('o-caption').textContent = 'dS';
      views.o.clear('dS of these rows is written to device memory, N values a row.');
    } else if (r.kind === 'bwd_dq') {
      $('o-caption').textContent = `dQ${sub(r.i)}, finished (× 1/√d)`;
      views.o.draw(tile(r.dq, h.Br, h.D, r.rowsValid, h.D, 'dQ', { scale: 'diverging', max: m.maxAbs(r.bh, 'dq', 'bwd_dq'),
        held: (x) => heldRow('dq', r.bh, rowIndex(x), k) }));
    } else {
      $('o-caption').textContent = 'dS';
      views.o.clear('A timing trace records no arrays.');
    }
  }
  drawRows(h, m, r, k, $);
  drawOnChip(h, m, r, k, $);
}

// drawReads shows the tiles the step reads from device memory.
function drawReads(h, m, r, $) {
  const box = $('qkv');
  const inp = m.inputs.get(r.bh);
  const rows = m.backward.rows.get(r.bh);
  const mats = [];
  // Tile t of n rows of an array of all rows: Q's and dO's rows are the
  // Nq queries, K's and V's the N keys.
  const slice = (src, t, n, all) => {
    const v = new Float32Array(n * h.D);
    v.set(src.subarray(t * n * h.D, Math.min(all, (t + 1) * n) * h.D));
    return v;
  };
  if (r.kind === 'bwd_step' && inp && rows) {
    mats.push(['Q', slice(inp.q, r.i, h.Br, h.Nq), h.Br, r.rowsValid, r.i, `Q${sub(r.i)}`, m.maxAbs(r.bh, 'q')]);
    mats.push(['dO', slice(rows.dO, r.i, h.Br, h.Nq), h.Br, r.rowsValid, r.i, `dO${sub(r.i)}`, m.maxAbs(r.bh, 'do')]);
    if (r.i === firstQTile(h, r.j)) {
      mats.push(['K', slice(inp.k, r.j, h.Bc, h.N), h.Bc, r.colsValid, r.j, `K${sub(r.j)} (once per block)`, m.maxAbs(r.bh, 'k')]);
      mats.push(['V', slice(inp.v, r.j, h.Bc, h.N), h.Bc, r.colsValid, r.j, `V${sub(r.j)} (once per block)`, m.maxAbs(r.bh, 'v')]);
    }
  } else if (r.kind === 'bwd_pre') {
    mats.push(['dO', r.do, h.Br, r.rowsValid, r.i, `dO${sub(r.i)}`, m.maxAbs(r.bh, 'do')]);
  } else if (r.kind === 'bwd_dp' && inp) {
    mats.push(['V', slice(inp.v, r.j, h.Bc, h.N), h.Bc, r.colsValid, r.j, `V${sub(r.j)}`, m.maxAbs(r.bh, 'v')]);
  } else if (r.kind === 'bwd_kv' && inp) {
    mats.push(['Q', slice(inp.q, r.i, h.Br, h.Nq), h.Br, r.rowsValid, r.i, `Q${sub(r.i)}`, m.maxAbs(r.bh, 'q')]);
  }
  const key = mats.map((t) => t[5]).join() + r.bh;
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  if (!mats.length) {
    box.textContent = r.kind === 'bwd_dq' ? (m.backward.naive ? 'Reads its rows of dS back, and every K_j.' : 'Reads dQ back, every kv-tile\'s part added in.')
      : r.kind === 'bwd_ds' ? 'Reads whole rows of P and dP back from device memory.' : 'No input tiles in this step.';
    return;
  }
  box.replaceChildren();
  for (const [name, values, n, valid, t, label, max] of mats) {
    const wrap = document.createElement('div');
    wrap.className = 'mat';
    const cap = document.createElement('span');
    cap.textContent = `${label} (${n}×${h.D})`;
    const hm = document.createElement('div');
    wrap.append(cap, hm);
    box.append(wrap);
    new Heatmap(hm, { maxWidth: 220, maxHeight: 220 }).draw({
      values, rows: n, cols: h.D, rowsValid: valid, colsValid: h.D, scale: 'diverging', max, name, rowIndex: (x) => t * n + x,
    });
  }
}

// drawRows: per row of the q-tile, L and D (read from device memory), and
// on a step the sum of its p in this tile and over every tile so far,
// which reaches 1 when the last kv-tile's block has visited: P is final
// from the start, with no running max to rescale it.
function drawRows(h, m, r, k, $) {
  $('rows-caption').textContent = m.backward.naive ? 'Per row of the q-tile: D, from the whole row' : 'Per row of the q-tile: L, D, and P\'s sums';
  const table = $('rows');
  table.replaceChildren();
  $('rows-note').textContent = r.kind === 'bwd_step'
    ? 'Σp so far reaches 1 once every kv-tile has visited the row: P = exp(S − L) is already normalised.'
    : '';
  const rows = m.backward.rows.get(r.bh);
  if (r.kind === 'timing' || !rows) return;
  const cols = [['row', 'row', (x) => r.i * h.Br + x]];
  if (rows.l) cols.push(['l', 'l', (x) => rows.l[r.i * h.Br + x]]);
  cols.push([rows.l ? 'd' : 'dNaive', 'd', (x) => rows.d[r.i * h.Br + x]]);
  if (r.kind === 'bwd_step') {
    const sumOf = (s, x) => { let t = 0; for (let c = 0; c < s.colsValid; c++) t += s.p[x * h.Bc + c]; return t; };
    const before = (m.backward.stepsOfQ.get(`${r.bh},${r.i}`) ?? []).filter((at) => at <= k).map((at) => m.steps[at]);
    cols.push(['sumP', 'sum-p', (x) => sumOf(r, x)]);
    cols.push(['sumPSoFar', 'sum-p-so-far', (x) => before.reduce((a, s) => a + sumOf(s, x), 0)]);
  }
  const head = table.createTHead().insertRow();
  for (const [name] of cols) {
    const [formula, words] = BACKWARD_HEADS[name];
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
  for (let x = 0; x < shown; x++) {
    const tr = body.insertRow();
    if (x >= r.rowsValid) {
      const td = tr.insertCell();
      tr.className = 'pad';
      td.colSpan = cols.length;
      td.textContent = `row ${r.i * h.Br + x}: padding (past ${rowsName(h)}), not data`;
      continue;
    }
    const sumsHeld = r.kind === 'bwd_step' && heldRow('psum', r.bh, r.i * h.Br + x, k);
    for (const [name, testid, get] of cols) {
      const td = tr.insertCell();
      const v = get(x);
      td.dataset.testid = `${testid}-${x}`;
      if (name === 'row') {
        td.textContent = String(v);
        continue;
      }
      if (sumsHeld && (name === 'sumP' || name === 'sumPSoFar')) {
        td.textContent = '?';
        td.className = 'held';
        td.title = 'The lesson asks you to predict this: it shows once you have answered the checkpoint.';
        continue;
      }
      td.dataset.value = String(v);
      td.textContent = fmt(v, 6);
      td.title = String(v);
    }
  }
  if (h.Br > shown) {
    const td = body.insertRow().insertCell();
    td.colSpan = cols.length;
    td.textContent = `… ${h.Br - shown} more rows`;
  }
}

// drawOnChip: on a step, dP, the block's dV_j and dK_j so far and the
// part the step adds into dQ_i; on a dq step, dQ as its q-tiles finish.
function drawOnChip(h, m, r, k, $) {
  const fig = $('o-final').closest('figure');
  const box = $('o-final');
  const caption = fig.querySelector('figcaption');
  if (r.kind === 'bwd_kv') {
    caption.textContent = `In kv-tile ${r.j}'s block: the accumulators dV${sub(r.j)} and dK${sub(r.j)} (× 1/√d at the end)`;
    box.replaceChildren();
    box.classList.add('qkv');
    for (const [label, values, name, array] of [[`dV${sub(r.j)} so far`, r.dv, 'dV', 'dv'], [`dK${sub(r.j)} so far`, r.dk, 'dK', 'dk']]) {
      const wrap = document.createElement('div');
      wrap.className = 'mat';
      wrap.dataset.testid = `bwd-${array}`;
      const cap = document.createElement('span');
      cap.textContent = label;
      const hm = document.createElement('div');
      wrap.append(cap, hm);
      box.append(wrap);
      new Heatmap(hm, { maxWidth: 220, maxHeight: 220 }).draw({
        values, rows: h.Bc, cols: h.D, rowsValid: r.colsValid, colsValid: h.D, scale: 'diverging', max: m.maxAbs(r.bh, array, 'bwd_kv'), name, rowIndex: (x) => r.j * h.Bc + x,
      });
    }
    return;
  }
  if (r.kind === 'bwd_step') {
    caption.textContent = `In kv-tile ${r.j}'s block: dP, the accumulators dV${sub(r.j)} and dK${sub(r.j)} (× 1/√d at the end), and the part added into dQ${sub(r.i)}`;
    const keyIndex = (x) => r.j * h.Bc + x;
    const panes = [
      ['dP = dO·Vᵀ', r.dp, h.Br, h.Bc, r.rowsValid, r.colsValid, 'dP', 'dp', (x) => r.i * h.Br + x, keyIndex],
      [`dV${sub(r.j)} so far`, r.dv, h.Bc, h.D, r.colsValid, h.D, 'dV', 'dv', keyIndex, undefined],
      [`dK${sub(r.j)} so far`, r.dk, h.Bc, h.D, r.colsValid, h.D, 'dK', 'dk', keyIndex, undefined],
      [`added into dQ${sub(r.i)}`, r.dq, h.Br, h.D, r.rowsValid, h.D, 'dQ part', 'dq', (x) => r.i * h.Br + x, undefined],
    ];
    box.replaceChildren();
    box.classList.add('qkv');
    for (const [label, values, rows, cols, rowsValid, colsValid, name, array, rowIndex, colIndex] of panes) {
      const wrap = document.createElement('div');
      wrap.className = 'mat';
      wrap.dataset.testid = `bwd-${array}`;
      const cap = document.createElement('span');
      cap.textContent = label;
      const hm = document.createElement('div');
      wrap.append(cap, hm);
      box.append(wrap);
      // Labelled, and wide enough at toy sizes for the digits a lesson's
      // question reads off them.
      new Heatmap(hm, { maxWidth: 300, maxHeight: 240, labels: true }).draw({
        values, rows, cols, rowsValid, colsValid, scale: 'diverging', max: m.maxAbs(r.bh, array, 'bwd_step'), name, rowIndex, colIndex,
        colWord: colIndex ? 'key' : 'column',
      });
    }
    return;
  }
  caption.textContent = 'dQ, filled in as q-tiles finish';
  box.classList.remove('qkv');
  const dq = m.backward.dq.get(r.bh);
  const values = new Float32Array(h.Nq * h.D).fill(NaN); // a row per query
  let written = 0;
  for (const [key, at] of m.backward.dqAt) {
    const [bh, i] = key.split(',').map(Number);
    if (bh !== r.bh || at > k || !dq) continue;
    const lo = i * h.Br * h.D, hi = Math.min(h.Nq, (i + 1) * h.Br) * h.D;
    values.set(dq.subarray(lo, hi), lo);
    written++;
  }
  box.replaceChildren();
  const hm = new Heatmap(box, { maxWidth: 520, maxHeight: 320, labels: true });
  if (!written) {
    hm.clear(r.kind === 'bwd_pre' ? 'dQ is zero: the kv-tiles\' blocks have not added to it yet.' : 'No q-tile\'s dQ has finished yet.');
    return;
  }
  hm.draw({ values, rows: h.Nq, cols: h.D, rowsValid: h.Nq, colsValid: h.D, scale: 'diverging', max: m.maxAbs(r.bh, 'dq', 'bwd_dq'), name: 'dQ',
    held: (x) => heldRow('dq', r.bh, x, k) });
}
