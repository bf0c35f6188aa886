// Heatmaps of tiles and matrices, and the colour scales they share.
// Colours come from d3-scale-chromatic: RdBu (colour-blind safe, diverging)
// for signed values, viridis for probabilities. Padding is hatched and
// masked scores are grey: neither is ever drawn as data.

import { fmt, MIN_FONT_PX } from './format.js';
import { showTip, hideTip } from './tooltip.js';

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

// LABEL_FONT is the font of a heatmap's row and column indices.
const LABEL_FONT = `${MIN_FONT_PX}px system-ui, sans-serif`;

// hasMaskedValue says whether a heatmap shows a −∞ (a masked score).
function hasMaskedValue({ values, cols, rowsValid, colsValid }) {
  for (let r = 0; r < rowsValid; r++) {
    for (let k = 0; k < colsValid; k++) if (values[r * cols + k] === -Infinity) return true;
  }
  return false;
}
