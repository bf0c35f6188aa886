// The stepper's views: heatmaps of tiles and matrices, the tiled score
// matrix, and number formatting. Colours come from d3-scale-chromatic:
// RdBu (colour-blind safe, diverging) for signed values, viridis for
// probabilities. Padding is hatched and masked scores are grey: neither is
// ever drawn as data.

import { batchHead, materialises } from './steps.js';
import { everything } from './taught.js';
import { rung } from './rungs.js';

const d3 = globalThis.d3;

const PADDING = [236, 236, 236];
const MASKED = [150, 150, 150];
const NOT_YET = [255, 255, 255];

function rgbOf(css) {
  const c = d3.rgb(css);
  return [c.r, c.g, c.b];
}

// A scale's colours are d3's, read once at LEVELS points: d3 parses a CSS
// colour string for every value it is asked, and a heatmap asks for
// thousands a step (most of the time a lesson's widgets took to draw).
// Neighbouring levels differ by under one unit of 255 in every channel.
const LEVELS = 1024;
const tables = {};

function tableFor(scale) {
  if (!tables[scale]) {
    const f = scale === 'sequential' ? d3.interpolateViridis : d3.interpolateRdBu;
    tables[scale] = Array.from({ length: LEVELS + 1 }, (_, k) => rgbOf(f(k / LEVELS)));
  }
  return tables[scale];
}

// colourFor maps a value to RGB under a scale: 'diverging' over
// [−max, max], 'sequential' over [0, max].
export function colourFor(v, scale, max) {
  if (v === -Infinity) return MASKED;
  if (Number.isNaN(v)) return NOT_YET;
  const seq = scale === 'sequential';
  const t = Math.max(0, Math.min(1, seq ? v / max : 0.5 - v / (2 * max)));
  if (!d3) return [255 * t, 255 * t, 255 * t];
  // 0/0 (an all-zero matrix) reads as zero: the scale's start, or its middle.
  const at = Number.isNaN(t) ? (seq ? 0 : 0.5) : t;
  return tableFor(seq ? 'sequential' : 'diverging')[Math.round(at * LEVELS)];
}

// fmt writes a float32 for people: four significant digits, −∞ for masked.
export function fmt(v, digits = 4) {
  if (v === -Infinity) return '−∞';
  if (v === Infinity) return '+∞';
  if (Number.isNaN(v)) return 'NaN';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(digits - 2).replace('-', '−');
  return Number(v.toPrecision(digits)).toString().replace('-', '−');
}

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

const tip = () => document.getElementById('tip');

export function showTip(ev, text) {
  const t = tip();
  if (!t) return;
  t.textContent = text;
  t.hidden = false;
  t.style.left = `${ev.clientX + 14}px`;
  t.style.top = `${ev.clientY + 14}px`;
}

export function hideTip() { const t = tip(); if (t) t.hidden = true; }

// fitSize is the room a view has inside its box: the box's width, and its
// height where the layout gives it one (the projector layout does), else
// the fallback.
export function fitSize(box, fallbackW, fallbackH, reserveH = 0) {
  const w = box.clientWidth || fallbackW;
  const fixed = getComputedStyle(box).getPropertyValue('--fit-height').trim() === '1';
  const h = fixed ? Math.max(40, box.clientHeight - reserveH) : fallbackH;
  return { w: Math.max(40, w), h };
}

// Heatmap draws a rows×cols matrix into a canvas inside its container, one
// colour per cell, with the value printed when the cells are large enough
// to read, and the value of any cell on hover. A fitting heatmap sizes its
// cells to the room its box has, so a projector gets large numbers.
export class Heatmap {
  // labels: print row and column indices along the left and top edges
  // (every one where they fit, else every few, always the first and the
  // last); digits: the most significant digits a cell's value is printed
  // with, where they fit (fewer where they do not, never under two).
  constructor(container, { maxWidth = 360, maxHeight = 300, caption = '', fit = false, labels = false, digits = 3 } = {}) {
    this.box = container;
    this.maxWidth = maxWidth;
    this.maxHeight = maxHeight;
    this.fit = fit;
    this.labels = labels;
    this.digits = Math.max(2, Math.min(7, Math.round(digits) || 3));
    this.canvas = document.createElement('canvas');
    this.scaleBar = document.createElement('div');
    this.scaleBar.className = 'scale';
    this.box.replaceChildren(this.canvas, this.scaleBar);
    this.caption = caption;
    this.canvas.addEventListener('mousemove', (ev) => this.hover(ev));
    this.canvas.addEventListener('mouseleave', hideTip);
  }

  clear(message = '') {
    this.opts = null;
    this.canvas.width = this.canvas.height = 0;
    this.canvas.style.width = this.canvas.style.height = '0';
    this.scaleBar.textContent = message;
  }

  // draw: values (Float32Array, row stride cols), rows, cols, rowsValid,
  // colsValid, scale, max, name, rowIndex(r) and colIndex(c) for global
  // indices in the labels and the tooltip, colWord for what a column is
  // ("key"; "column" by default), held(r, c) for the cells a lesson's
  // checkpoint asks the student to predict: drawn blank with "?" and no
  // value in the tooltip until it is answered.
  draw(opts) {
    this.opts = opts;
    const { rows, cols, values } = opts;
    let maxW = this.maxWidth, maxH = this.maxHeight, maxCell = 48;
    if (this.fit) {
      // The scale line under the canvas takes about 1.6 lines of text.
      const room = fitSize(this.box, this.maxWidth, this.maxHeight, 1.6 * parseFloat(getComputedStyle(this.box).fontSize));
      maxW = room.w;
      maxH = room.h;
      maxCell = 160;
    }
    // The index labels take a margin on the left (as wide as the widest
    // row index) and on top (a line of text); the cells share the rest.
    const pad = this.labelRoom(opts);
    maxW = Math.max(40, maxW - pad.left);
    maxH = Math.max(40, maxH - pad.top);
    const cell = Math.max(1, Math.min(maxCell, Math.floor(maxW / cols), Math.floor(maxH / rows)));
    // Large matrices get fractional cells: draw one pixel per cell, then scale.
    // Cells may widen (up to 2.2 times their height) into spare width:
    // numbers are wider than tall.
    const cellW = cell >= 8 ? Math.max(cell, Math.min(Math.floor(maxW / cols), Math.floor(cell * 2.2))) : cell;
    // Below one pixel a cell, a fitting heatmap still fills its room.
    const shrink = Math.min(maxW / cols, maxH / rows);
    const w = cell > 1 ? cols * cellW : this.fit ? Math.max(cols, Math.floor(cols * shrink)) : Math.min(cols, maxW);
    const hgt = cell > 1 ? rows * cell : this.fit ? Math.max(rows, Math.floor(rows * shrink)) : Math.min(rows, maxH * 2);
    this.cellW = w / cols;
    this.cellH = hgt / rows;

    this.pad = pad;
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    c.width = Math.round((w + pad.left) * dpr);
    c.height = Math.round((hgt + pad.top) * dpr);
    c.style.width = `${w + pad.left}px`;
    c.style.height = `${hgt + pad.top}px`;
    const g = c.getContext('2d');
    const img = new ImageData(cols, rows);
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols; k++) {
        const pad = r >= opts.rowsValid || k >= opts.colsValid;
        const rgb = pad ? PADDING : opts.held?.(r, k) ? NOT_YET : colourFor(values[r * cols + k], opts.scale, opts.max);
        const p = 4 * (r * cols + k);
        img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
      }
    }
    const off = new OffscreenCanvas(cols, rows);
    off.getContext('2d').putImageData(img, 0, 0);
    g.imageSmoothingEnabled = false;
    g.drawImage(off, Math.round(pad.left * dpr), Math.round(pad.top * dpr), Math.round(w * dpr), Math.round(hgt * dpr));
    g.scale(dpr, dpr);
    if (pad.left || pad.top) this.printLabels(g, opts, w, hgt);
    g.translate(pad.left, pad.top);
    if (this.cellW >= 8) this.hatchPadding(g, opts);
    this.canvas.dataset.fontPx = '0';
    this.canvas.dataset.digits = '0';
    if (this.cellW >= 34 && this.cellH >= 18) this.printValues(g, opts);
    const scale = opts.scale === 'sequential'
      ? `colour: 0 … ${fmt(opts.max)}`
      : `colour: −${fmt(opts.max)} … 0 … ${fmt(opts.max)}`;
    this.scaleBar.replaceChildren(scale);
    // −∞ is no error: a masked score. It has its own calm grey, and a key.
    if (hasMaskedValue(opts)) {
      const key = document.createElement('span');
      key.className = 'neginf-key';
      key.append(document.createElement('i'), ` ${opts.masked || '−∞: masked'}`);
      this.scaleBar.append(key);
    }
  }

  hatchPadding(g, { rows, cols, rowsValid, colsValid }) {
    g.save();
    g.strokeStyle = '#b5b5b5';
    g.lineWidth = 1;
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols; k++) {
        if (r < rowsValid && k < colsValid) continue;
        const x = k * this.cellW, y = r * this.cellH;
        g.beginPath();
        for (let t = -this.cellH; t < this.cellW; t += 6) {
          g.moveTo(x + Math.max(t, 0), y + Math.max(-t, 0));
          g.lineTo(x + Math.min(t + this.cellH, this.cellW), y + Math.min(this.cellH, this.cellW - t));
        }
        g.stroke();
      }
    }
    g.restore();
  }

  // printValues writes each cell's value in it, with three significant
  // digits, or two where three do not fit; never smaller than MIN_FONT_PX:
  // where even two digits would be smaller, no value is printed and the
  // pointer reads them.
  // Every number of a panel is printed at one size, the largest at which
  // the longest of them fits its cell, so that no value looks more
  // important than its neighbours for being shorter.
  printValues(g, { rows, cols, values, rowsValid, colsValid, scale, max, held }) {
    const cap = this.fit ? 40 : 13;
    // Monospace glyphs are about 0.6 em wide: fit the text in the cell.
    const sizeOf = (text) => Math.min(cap, this.cellH * 0.42, (this.cellW - 6) / (0.62 * text.length));
    // The size the longest value of the panel gets with d digits.
    const sizeWith = (d) => {
      let px = Infinity;
      for (let r = 0; r < rowsValid; r++) {
        for (let k = 0; k < colsValid; k++) {
          const v = values[r * cols + k];
          if (!Number.isNaN(v) && !held?.(r, k)) px = Math.min(px, sizeOf(fmt(v, d)));
        }
      }
      return px;
    };
    let digits = 0, px = 0;
    for (let d = this.digits; d >= 2; d--) {
      px = sizeWith(d);
      if (px >= MIN_FONT_PX) { digits = d; break; }
    }
    if (!digits || px === Infinity) return;
    g.save();
    g.textAlign = 'center';
    g.textBaseline = 'middle';
    g.font = `${px}px ui-monospace, "DejaVu Sans Mono", monospace`;
    for (let r = 0; r < rowsValid; r++) {
      for (let k = 0; k < colsValid; k++) {
        const v = values[r * cols + k];
        if (held?.(r, k)) {
          g.fillStyle = '#111';
          g.fillText('?', (k + 0.5) * this.cellW, (r + 0.5) * this.cellH);
          continue;
        }
        if (Number.isNaN(v)) continue; // not written yet: left blank
        const [R, G, B] = colourFor(v, scale, max);
        g.fillStyle = 0.299 * R + 0.587 * G + 0.114 * B > 140 ? '#111' : '#fff';
        g.fillText(fmt(v, digits), (k + 0.5) * this.cellW, (r + 0.5) * this.cellH);
      }
    }
    // The size of the numbers printed, in CSS pixels (tests hold the
    // projector layout to a size a room can read), and their significant
    // digits.
    this.canvas.dataset.fontPx = px.toFixed(1);
    this.canvas.dataset.digits = String(digits);
    g.restore();
  }

  // labelRoom is the margin the index labels need: the widest row index
  // on the left, a line on top; none without labels.
  labelRoom({ rows, cols, rowIndex, colIndex }) {
    if (!this.labels || !rows || !cols) return { left: 0, top: 0 };
    const g = this.canvas.getContext('2d');
    g.font = LABEL_FONT;
    const widest = Math.max(...[0, rows - 1].map((r) => g.measureText(String(rowIndex ? rowIndex(r) : r)).width));
    return { left: Math.ceil(widest) + 6, top: MIN_FONT_PX + 5 };
  }

  // printLabels writes the row indices down the left edge and the column
  // indices along the top, in the run's own numbering (a tile's rows are
  // the queries it holds, its columns the keys): every index where a
  // label fits beside the next, else every 2nd, 4th, 8th…, and always the
  // first and the last real row and column.
  printLabels(g, { rowsValid, colsValid, rowIndex, colIndex }, w, hgt) {
    const { left, top } = this.pad;
    const rowName = (r) => String(rowIndex ? rowIndex(r) : r);
    const colName = (k) => String(colIndex ? colIndex(k) : k);
    g.save();
    g.font = LABEL_FONT;
    g.fillStyle = '#4a5058';
    const widestCol = Math.max(...[0, colsValid - 1].map((k) => g.measureText(colName(k)).width)) + 6;
    const every = (room, need, n) => {
      let k = 1;
      while (k < n && room * k < need) k *= 2;
      return k;
    };
    const picked = (n, k, room, need) => {
      const out = [];
      for (let x = 0; x < n; x += k) out.push(x);
      // The last, and no label so close before it that the two touch.
      if (out.at(-1) !== n - 1) {
        if (out.length > 1 && (n - 1 - out.at(-1)) * room < need) out.pop();
        out.push(n - 1);
      }
      return out;
    };
    g.textBaseline = 'middle';
    g.textAlign = 'right';
    const rowNeed = MIN_FONT_PX + 2;
    for (const r of picked(rowsValid, every(this.cellH, rowNeed, rowsValid), this.cellH, rowNeed)) {
      g.fillText(rowName(r), left - 4, Math.min(Math.max(top + (r + 0.5) * this.cellH, top + MIN_FONT_PX / 2), top + hgt - MIN_FONT_PX / 2));
    }
    g.textAlign = 'center';
    g.textBaseline = 'alphabetic';
    for (const k of picked(colsValid, every(this.cellW, widestCol, colsValid), this.cellW, widestCol)) {
      const x = left + (k + 0.5) * this.cellW;
      g.fillText(colName(k), Math.min(Math.max(x, left + widestCol / 2), left + w - widestCol / 2), top - 4);
    }
    g.restore();
    this.canvas.dataset.labels = '1';
  }

  hover(ev) {
    const o = this.opts;
    if (!o) return;
    const rect = this.canvas.getBoundingClientRect();
    // The canvas may be drawn narrower than its size (max-width): scale.
    const pad = this.pad || { left: 0, top: 0 };
    const sx = rect.width / (o.cols * this.cellW + pad.left), sy = rect.height / (o.rows * this.cellH + pad.top);
    const k = Math.floor(((ev.clientX - rect.left) / sx - pad.left) / this.cellW);
    const r = Math.floor(((ev.clientY - rect.top) / sy - pad.top) / this.cellH);
    if (r < 0 || k < 0 || r >= o.rows || k >= o.cols) return hideTip();
    // "S: row 4, key 9", as the labels along the edges number them.
    const where = `${o.name}: row ${o.rowIndex ? o.rowIndex(r) : r}, ${o.colWord || 'column'} ${o.colIndex ? o.colIndex(k) : k}`;
    if (r >= o.rowsValid || k >= o.colsValid) return showTip(ev, `${where}: padding, not data`);
    if (o.held?.(r, k)) return showTip(ev, `${where}: ? (the lesson asks you to predict it: it shows once you have answered the checkpoint)`);
    const v = o.values[r * o.cols + k];
    if (v === -Infinity) return showTip(ev, `${where}: −∞ (masked)`);
    if (Number.isNaN(v)) return showTip(ev, `${where}: not written yet`);
    showTip(ev, `${where}: ${v}`);
  }
}

// MIN_FONT_PX is the smallest a number is printed in a view: 12 CSS
// pixels, legible in a lesson's frame on a laptop.
export const MIN_FONT_PX = 12;

// LABEL_FONT is the font of a heatmap's row and column indices.
const LABEL_FONT = `${MIN_FONT_PX}px system-ui, sans-serif`;

// hasMaskedValue says whether a heatmap shows a −∞ (a masked score).
function hasMaskedValue({ values, cols, rowsValid, colsValid }) {
  for (let r = 0; r < rowsValid; r++) {
    for (let k = 0; k < colsValid; k++) if (values[r * cols + k] === -Infinity) return true;
  }
  return false;
}

// Naive's finished tiles keep a colour of their own: its S and P stay in
// device memory to the end, where flash's tiles left the chip as O only.
// CAUSAL_LINE is the colour of the tile grid's dashed causal diagonal.
export const CAUSAL_LINE = '#8a5a00';

const TILE_COLOURS = {
  pending: '#ffffff', done: '#c9d8f2', current: '#dbe6ff', 'current-row': '#eef3ff',
  skipped: '#e6e6e6', untraced: '#f4f4f4', stored: '#f6d3a6', normalised: '#d9c9f0', consumed: '#b48ad8', scanned: '#e8efc4',
};

// tileStateNames are the tile states in words, per kernel: the legend and
// the tooltip say the same thing, in the words a lesson's reader knows.
export function tileStateNames(variant, know = everything) {
  const skipped = know.knows('causal') ? 'skipped: fully masked' : `skipped (the causal mask: ${know.lesson('causal')})`;
  const shared = materialises(variant)
    ? { pending: 'not computed', stored: 'S in device memory', normalised: 'P in device memory', consumed: 'P·V done (S, P stay in device memory)', current: 'this step', 'current-row': 'this q-tile', untraced: 'not traced' }
    : { pending: 'to do', done: know.knows('memory') ? 'done (left the chip as O only)' : 'done', current: 'this step', 'current-row': know.knows('tiles') ? 'this q-tile' : 'these rows', skipped, untraced: 'not traced' };
  // A rung's own names (kernels.Words) follow 'pending', in the order the
  // kernel reaches them, then the shared ones it does not replace.
  const own = Object.fromEntries((rung(variant)?.tile_states ?? []).map((t) => [t.state, t.words]));
  return { pending: shared.pending, ...own, ...shared, ...own };
}

// TileGrid draws the N×N score matrix split into Br×Bc tiles, each coloured
// by what the kernel has done with it up to the current step. Ragged last
// tiles are drawn at their true, smaller size.
export class TileGrid {
  constructor(canvas, legend, onPick, know = everything) {
    this.canvas = canvas;
    this.legend = legend;
    this.onPick = onPick;
    this.know = know;
    canvas.addEventListener('click', (ev) => {
      const t = this.tileAt(ev);
      if (t) onPick(t.i, t.j);
    });
    canvas.addEventListener('mousemove', (ev) => { this.hover = ev; this.showHover(); });
    canvas.addEventListener('mouseleave', () => { this.hover = null; hideTip(); });
  }

  // showHover writes the tooltip of the tile under the pointer; a draw calls
  // it again, so stepping with the keyboard keeps the tooltip current.
  showHover() {
    const ev = this.hover;
    const t = ev && this.tileAt(ev);
    if (!t) return hideTip();
    const h = this.h;
    const st = this.states[t.i * h.Tc + t.j];
    const words = tileStateNames(h.variant, this.know)[st] || st;
    showTip(ev, `tile (${t.i}, ${t.j}): rows ${t.i * h.Br}–${Math.min(h.N, (t.i + 1) * h.Br) - 1}, cols ${t.j * h.Bc}–${Math.min(h.N, (t.j + 1) * h.Bc) - 1}\n${words}`);
  }

  tileAt(ev) {
    if (!this.h) return null;
    const rect = this.canvas.getBoundingClientRect();
    const x = (ev.clientX - rect.left) / rect.width * this.h.N;
    const y = (ev.clientY - rect.top) / rect.height * this.h.N;
    const i = Math.floor(y / this.h.Br), j = Math.floor(x / this.h.Bc);
    if (i < 0 || j < 0 || i >= this.h.Tr || j >= this.h.Tc) return null;
    return { i, j };
  }

  draw(h, states) {
    this.h = h;
    this.states = states;
    // The grid is square: as wide as its box, and in the projector layout no
    // taller than the box either.
    const room = fitSize(this.canvas.parentElement, 480, 440);
    const size = Math.floor(Math.max(120, Math.min(720, room.w, room.h)));
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    c.width = size * dpr;
    c.height = size * dpr;
    c.style.width = `${size}px`;
    c.style.height = `${size}px`;
    const g = c.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, size, size);
    const px = size / h.N;
    const grid = h.Tr * h.Tc <= 4096;
    c.dataset.fontPx = '0'; // the tiles' (i, j), where printed: tests hold it legible
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        const st = states[i * h.Tc + j];
        const x = j * h.Bc * px, y = i * h.Br * px;
        const w = Math.min(h.Bc, h.N - j * h.Bc) * px, hh = Math.min(h.Br, h.N - i * h.Br) * px;
        g.fillStyle = TILE_COLOURS[st];
        g.fillRect(x, y, w, hh);
        if (st === 'skipped' && w > 6) {
          g.save();
          g.beginPath();
          g.rect(x, y, w, hh);
          g.clip();
          g.strokeStyle = '#bdbdbd';
          for (let t = -hh; t < w; t += 7) { g.moveTo(x + t, y); g.lineTo(x + t + hh, y + hh); }
          g.stroke();
          g.restore();
        }
        if (grid) {
          g.strokeStyle = '#c4c9cf';
          g.lineWidth = 1;
          g.strokeRect(x + 0.5, y + 0.5, w - 1, hh - 1);
        }
      }
    }
    if (h.causal) {
      g.strokeStyle = CAUSAL_LINE;
      g.setLineDash([5, 4]);
      g.beginPath();
      g.moveTo(0, 0);
      g.lineTo(size, size);
      g.stroke();
      g.setLineDash([]);
    }
    // Each tile's (i, j), where it fits at a legible size, on a plate of
    // its tile's colour: the causal diagonal runs under the label, never
    // through it.
    const labels = [];
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        const x = j * h.Bc * px, y = i * h.Br * px;
        const w = Math.min(h.Bc, h.N - j * h.Bc) * px, hh = Math.min(h.Br, h.N - i * h.Br) * px;
        if (w / 3.2 < MIN_FONT_PX || hh < 22) continue;
        const fpx = Math.min(22, Math.floor(w / 3.2));
        c.dataset.fontPx = String(fpx);
        g.font = `${fpx}px system-ui, sans-serif`;
        const text = `${i},${j}`;
        const tw = g.measureText(text).width;
        const box = [x + w / 2 - tw / 2 - 3, y + hh / 2 - fpx / 2 - 2, tw + 6, fpx + 4];
        g.fillStyle = TILE_COLOURS[states[i * h.Tc + j]];
        g.fillRect(...box);
        g.fillStyle = '#58606a';
        g.textAlign = 'center';
        g.textBaseline = 'middle';
        g.fillText(text, x + w / 2, y + hh / 2);
        labels.push(box.map((v) => Math.round(v)).join(' '));
      }
    }
    // Where the labels sit, in CSS pixels (x y w h; …): tests hold them
    // clear of the diagonal.
    c.dataset.labelBoxes = labels.join(';');
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        if (states[i * h.Tc + j] !== 'current') continue;
        g.strokeStyle = '#0b5fff';
        g.lineWidth = 3;
        g.strokeRect(j * h.Bc * px + 1.5, i * h.Br * px + 1.5, Math.min(h.Bc, h.N - j * h.Bc) * px - 3, Math.min(h.Br, h.N - i * h.Br) * px - 3);
      }
    }
    const names = tileStateNames(h.variant, this.know);
    delete names['current-row'];
    this.legend.replaceChildren(...Object.entries(names).map(([k, v]) => {
      const s = document.createElement('span');
      const sw = document.createElement('i');
      sw.style.background = TILE_COLOURS[k];
      if (k === 'current') sw.style.borderColor = '#0b5fff';
      s.append(sw, v);
      return s;
    }));
    if (this.hover && !document.getElementById('tip')?.hidden) this.showHover();
  }
}

// tex typesets a formula with KaTeX into an element, or writes it plainly
// when KaTeX is missing.
export function tex(el, formula, options = {}) {
  if (globalThis.katex) globalThis.katex.render(formula, el, { throwOnError: false, ...options });
  else el.textContent = formula;
  return el;
}

// Timeline draws each traced step as a mark on its SM's row, from its start
// to its end as the GPU's %globaltimer saw them: which SM ran which tile
// when, something only a real GPU run can show. A click on a mark picks its
// step.
export class Timeline {
  constructor(canvas, note, onPick) {
    this.canvas = canvas;
    this.note = note;
    this.onPick = onPick;
    this.marks = null;
    canvas.addEventListener('click', (ev) => {
      const k = this.stepAt(ev);
      if (k >= 0) onPick(k);
    });
    canvas.addEventListener('mousemove', (ev) => {
      const k = this.stepAt(ev);
      if (k < 0) return hideTip();
      const m = this.marks[k], r = this.model.steps[k];
      showTip(ev, `SM ${r.sm}: ${batchHead(this.model.h, r.bh)}, q-tile ${r.i}` +
        `${r.j >= 0 ? `, kv-tile ${r.j}` : ', epilogue'}\n${m.t0.toFixed(2)}–${m.t1.toFixed(2)} µs`);
    });
    canvas.addEventListener('mouseleave', hideTip);
  }

  // prepare turns the steps' timestamps into µs since the first start.
  prepare(model) {
    const steps = model.steps;
    let first = null;
    for (const r of steps) if (r.tStart > 0n && (first === null || r.tStart < first)) first = r.tStart;
    this.marks = steps.map((r) => ({ t0: Number(r.tStart - first) / 1000, t1: Number(r.tEnd - first) / 1000, sm: r.sm }));
    this.span = Math.max(1e-3, ...this.marks.map((m) => m.t1));
    this.model = model;
    this.count = steps.length;
    this.base = null;
  }

  // rowOf maps an SM to its row. A grid that uses few SMs (a toy run uses
  // 4 of 132) gets one labelled row per SM it used, not 128 empty rows.
  layoutRows(h) {
    const used = [...new Set(this.marks.map((x) => x.sm))].sort((a, b) => a - b);
    if (used.length <= 24) {
      this.rowOf = new Map(used.map((sm, r) => [sm, r]));
      this.smOfRow = used;
      this.compact = true;
    } else {
      this.rowOf = null;
      this.smOfRow = null;
      this.compact = false;
    }
    this.used = used.length;
    return this.compact ? used.length : h.numSMs;
  }

  row(sm) { return this.rowOf ? this.rowOf.get(sm) : sm; }

  stepAt(ev) {
    if (!this.marks || !this.layout) return -1;
    const rect = this.canvas.getBoundingClientRect();
    const { left, width, rowH, rows } = this.layout;
    const x = (ev.clientX - rect.left) * (this.layout.w / rect.width);
    const y = (ev.clientY - rect.top) * (this.layout.h / rect.height);
    const row = Math.floor(y / rowH);
    if (row < 0 || row >= rows) return -1;
    const sm = this.smOfRow ? this.smOfRow[row] : row;
    const t = (x - left) / width * this.span;
    let best = -1, dist = Infinity;
    this.marks.forEach((m, k) => {
      if (m.sm !== sm) return;
      const d = t < m.t0 ? m.t0 - t : t > m.t1 ? t - m.t1 : 0;
      if (d < dist) { dist = d; best = k; }
    });
    return dist <= this.span / width * 6 ? best : -1;
  }

  // draw draws the marks of a complete trace, step k's highlighted. While
  // the steps still arrive the canvas only takes the height it will have,
  // told by the header: a row per traced block where they are few (each
  // gets an SM of its own), else the whole grid's SMs.
  draw(model, k, complete = true) {
    const h = model.h;
    if (h.source === 'cpu' || !h.numSMs) {
      this.canvas.width = this.canvas.height = 0;
      this.canvas.style.height = '0';
      this.note.textContent = 'Only a GPU run has SMs and clocks: the CPU mirror records neither. Run on a GPU, or replay a recorded timeline (mode=timing).';
      return;
    }
    if (!complete) {
      const blocks = (h.tracedBH[1] - h.tracedBH[0]) * (h.tracedQ[1] - h.tracedQ[0]);
      const compact = blocks <= 24;
      const rows = compact ? Math.min(blocks, h.numSMs) : h.numSMs;
      this.canvas.style.height = `${Math.ceil(rowHeight(rows, compact) * rows) + 20}px`;
      this.note.textContent = 'The timeline is drawn once every step has arrived.';
      return;
    }
    if (!this.marks || this.count !== model.steps.length || this.model !== model) this.prepare(model);
    const w = Math.max(300, this.canvas.clientWidth || 800);
    const rows = this.layoutRows(h);
    const rowH = rowHeight(rows, this.compact);
    const axisH = 20;
    const hgt = Math.ceil(rowH * rows) + axisH;
    // The SM labels right-aligned in a margin as wide as the widest of them.
    // Each SM used gets a label, or, for a whole grid, every 16th SM and
    // the last, less a 16th too close above the last to stay clear of it:
    // [text, row].
    const labels = [];
    if (this.compact) this.smOfRow.forEach((sm, r) => labels.push([`SM ${sm}`, r]));
    else {
      for (let sm = 0; sm < h.numSMs - 1; sm += 16) labels.push([`SM ${sm}`, sm]);
      if (labels.length > 1 && (h.numSMs - 1 - labels.at(-1)[1]) * rowH < MIN_FONT_PX + 2) labels.pop();
      labels.push([`SM ${h.numSMs - 1}`, h.numSMs - 1]);
    }
    const measure = this.canvas.getContext('2d');
    measure.font = TIMELINE_FONT;
    const widest = Math.max(...labels.map(([t]) => measure.measureText(t).width));
    const left = Math.ceil(widest) + 12, width = w - left - 10;
    // What tests hold: labels at a legible size, with room to their left.
    this.canvas.dataset.fontPx = String(MIN_FONT_PX);
    this.canvas.dataset.labelRoom = String(Math.floor(left - 6 - widest));
    this.layout = { w, h: hgt, left, width, rowH, rows };
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    if (!this.base || this.base.width !== Math.round(w * dpr) || this.base.height !== Math.round(hgt * dpr)) {
      // The marks, drawn once per trace; each step only adds its highlight.
      this.base = new OffscreenCanvas(Math.round(w * dpr), Math.round(hgt * dpr));
      const g = this.base.getContext('2d');
      g.scale(dpr, dpr);
      g.fillStyle = '#fafafa';
      g.fillRect(left, 0, width, rowH * rows);
      const colours = d3 ? d3.schemeTableau10 : ['#4e79a7'];
      const gap = rowH > 3 ? 1 : 0;
      this.marks.forEach((m, s) => {
        const r = model.steps[s];
        g.fillStyle = colours[r.i % colours.length];
        g.fillRect(left + m.t0 / this.span * width, this.row(m.sm) * rowH, Math.max(1, (m.t1 - m.t0) / this.span * width), Math.max(1, rowH - gap));
      });
      g.fillStyle = '#333';
      g.font = TIMELINE_FONT;
      g.textBaseline = 'middle';
      g.textAlign = 'right';
      // Half a line from the top and the bottom at least: no label is cut.
      const half = MIN_FONT_PX / 2 + 1;
      for (const [text, r] of labels) g.fillText(text, left - 6, Math.min(Math.max((r + 0.5) * rowH, half), rowH * rows - half));
      // Time ticks at round steps of µs.
      g.textBaseline = 'top';
      g.textAlign = 'center';
      const step = niceStep(this.span / 6);
      for (let t = 0; t <= this.span + 1e-9; t += step) {
        const x = left + t / this.span * width;
        g.fillRect(x, rowH * rows, 1, 4);
        g.fillText(`${+t.toFixed(3)} µs`, Math.min(Math.max(x, left + 18), left + width - 18), rowH * rows + 5);
      }
    }
    c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
    c.style.height = `${hgt}px`;
    const g = c.getContext('2d');
    g.drawImage(this.base, 0, 0);
    g.scale(dpr, dpr);
    const m = this.marks[k];
    if (m) {
      const x = left + m.t0 / this.span * width;
      const y = this.row(m.sm) * rowH;
      g.strokeStyle = '#111';
      g.lineWidth = 2;
      g.strokeRect(x - 1, y - 1, Math.max(3, (m.t1 - m.t0) / this.span * width) + 2, rowH + 2);
      g.strokeStyle = 'rgba(0,0,0,0.35)';
      g.lineWidth = 1;
      g.beginPath();
      g.moveTo(x, 0);
      g.lineTo(x, rowH * rows);
      g.stroke();
    }
    const idle = h.numSMs - this.used;
    this.note.textContent = `${this.marks.length} steps on ${this.used} of ${h.numSMs} SMs over ${this.span.toFixed(1)} µs` +
      (this.compact && idle > 0 ? ` (only the SMs used are drawn; the other ${idle} had no traced block)` : '') + '; colour: q-tile. ' +
      `Timer: steps of ${h.timerTickNs} ns at finest (on the H100 one thread's readings advance 256 ns at a time under load). Click a mark to go to its step.` +
      (h.timing ? ' Stamping slows the kernel too, less than a full trace does (docs/LADDER.md measures it per rung).'
        : ' A full trace slows its traced blocks with their own writes; mode=timing stamps every block with fewer.');
  }
}

const TIMELINE_FONT = `${MIN_FONT_PX}px system-ui, sans-serif`;

// rowHeight is the height of an SM's row: large, labelled rows for the few
// SMs a small grid uses, thin ones for a whole GPU.
const rowHeight = (rows, compact) => (compact ? Math.max(14, Math.min(24, 240 / rows)) : Math.max(1.5, Math.min(6, 420 / rows)));

// niceStep rounds a tick spacing to 1, 2 or 5 times a power of ten.
function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  const f = x / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}
