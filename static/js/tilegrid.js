// The tile grid: the score matrix (N×N, or Nq×N where a run has fewer
// queries than keys) split into Br×Bc tiles, each coloured by what the
// kernel has done with it up to the step shown, with a legend and a
// tooltip in the words a lesson's reader knows.

import { materialises } from './steps.js';
import { everything } from './taught.js';
import { rung } from './rungs.js';
import { MIN_FONT_PX } from './format.js';
import { showTip, hideTip } from './tooltip.js';
import { fitSize } from './heatmap.js';
import { gridGeometry, keysRange, positionsRange, rowsRange, square, tileRect } from './shape.js';
import { SPLIT_BAND, splitBands, splitOfTile } from './splits.js';

// Naive's finished tiles keep a colour of their own: its S and P stay in
// device memory to the end, where flash's tiles left the chip as O only.
// CAUSAL_LINE is the colour of the tile grid's dashed causal diagonal.
export const CAUSAL_LINE = '#8a5a00';

// SPLIT_LINE is the colour of the boundaries between split-KV's splits and
// of the band that names them; SPLIT_FILLS the band's alternating fills,
// SPLIT_NOW the current split's.
export const SPLIT_LINE = '#b35c00';
const SPLIT_FILLS = ['#fbf0e0', '#f3dfc2'];
const SPLIT_NOW = '#f2a640';

const TILE_COLOURS = {
  pending: '#ffffff', done: '#c9d8f2', current: '#dbe6ff', 'current-row': '#eef3ff', 'current-split': '#ffd9a3',
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

// TileGrid draws the score matrix (Nq rows of queries by N columns of keys)
// split into Br×Bc tiles, each coloured by what the kernel has done with it
// up to the current step. Ragged last tiles are drawn at their true,
// smaller size.
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
    // With fewer queries than keys, a row's position too: the causal mask
    // is drawn by positions.
    const at = square(h) ? '' : ` (positions ${positionsRange(h, t.i)})`;
    const split = this.layout ? splitOfTile(this.layout, t.j) : -1;
    const inSplit = split >= 0 ? `, split ${split}` : '';
    showTip(ev, `tile (${t.i}, ${t.j}): rows ${rowsRange(h, t.i)}${at}, cols ${keysRange(h, t.j)}${inSplit}\n${words}`);
  }

  tileAt(ev) {
    if (!this.h) return null;
    const rect = this.canvas.getBoundingClientRect();
    // The split band, if any, sits above the tiles: its share of the
    // canvas's height is not the tiles'.
    const band = this.band || 0, drawn = this.drawnHeight || rect.height;
    const x = (ev.clientX - rect.left) / rect.width * this.h.N;
    const y = ((ev.clientY - rect.top) * (drawn + band) / rect.height - band) / drawn * this.h.Nq;
    const i = Math.floor(y / this.h.Br), j = Math.floor(x / this.h.Bc);
    if (i < 0 || j < 0 || i >= this.h.Tr || j >= this.h.Tc) return null;
    return { i, j };
  }

  // draw: layout is a split-KV trace's splits (splits.js), drawn as a band
  // above the tiles that names each split over its kv-tiles, and a line
  // down the grid where each split but the first starts; current the split
  // the step shown belongs to (−1: none).
  draw(h, states, layout = null, current = -1) {
    this.h = h;
    this.states = states;
    this.layout = layout;
    // The grid is as wide as its box, and in the projector layout no
    // taller than the box either: square for a square run, as tall as its
    // query rows where there are fewer (gridGeometry).
    const room = fitSize(this.canvas.parentElement, 480, 440);
    const band = layout ? SPLIT_BAND : 0;
    const size = Math.floor(Math.max(120, Math.min(720, room.w, room.h - band)));
    const geo = gridGeometry(h, size);
    const height = geo.height;
    this.band = band;
    this.drawnHeight = height;
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    c.width = size * dpr;
    c.height = (height + band) * dpr;
    c.style.width = `${size}px`;
    c.style.height = `${height + band}px`;
    c.style.aspectRatio = square(h) && !band ? '' : 'auto'; // the page's style keeps the grid square
    const g = c.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, size, height + band);
    const splits = splitBands(h, layout, geo);
    if (band) this.drawSplitBand(g, splits.bands, current);
    g.translate(0, band);
    const grid = h.Tr * h.Tc <= 4096;
    c.dataset.fontPx = '0'; // the tiles' (i, j), where printed: tests hold it legible
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        const st = states[i * h.Tc + j];
        const [x, y, w, hh] = tileRect(h, geo, i, j);
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
      // The mask's edge, aligned to the end: query row r is position
      // N − Nq + r (the corner to corner diagonal of a square run).
      const [x0, y0, x1, y1] = geo.diagonal;
      g.strokeStyle = CAUSAL_LINE;
      g.setLineDash([5, 4]);
      g.beginPath();
      g.moveTo(x0, y0);
      g.lineTo(x1, y1);
      g.stroke();
      g.setLineDash([]);
    }
    // Where each split but the first starts: a line down the whole grid,
    // from the band that names the splits.
    if (band) {
      g.strokeStyle = SPLIT_LINE;
      g.lineWidth = 2;
      g.beginPath();
      for (const x of splits.boundaries) { g.moveTo(x, -band); g.lineTo(x, height); }
      g.stroke();
    }
    // Where the splits lie, in CSS pixels (s:x0-x1;…), and their
    // boundaries: tests hold them to the layout.
    c.dataset.splits = splits.bands.map((b) => `${b.s}:${b.x0.toFixed(1)}-${b.x1.toFixed(1)}`).join(';');
    c.dataset.splitBoundaries = splits.boundaries.map((x) => x.toFixed(1)).join(';');
    c.dataset.currentSplit = String(current);
    // Each tile's (i, j), where it fits at a legible size, on a plate of
    // its tile's colour: the causal diagonal runs under the label, never
    // through it.
    const labels = [];
    for (let i = 0; i < h.Tr; i++) {
      for (let j = 0; j < h.Tc; j++) {
        const [x, y, w, hh] = tileRect(h, geo, i, j);
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
        const [x, y, w, hh] = tileRect(h, geo, i, j);
        g.strokeStyle = '#0b5fff';
        g.lineWidth = 3;
        g.strokeRect(x + 1.5, y + 1.5, w - 3, hh - 3);
      }
    }
    const names = tileStateNames(h.variant, this.know);
    delete names['current-row'];
    if (layout) names['current-split'] = 'this split (its end, or its merge)';
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

  // drawSplitBand names the splits in a band above the tiles, each over
  // its own kv-tiles' columns, in alternating fills, the current split's
  // stronger: "split 2", or "2" where that does not fit, or no word.
  drawSplitBand(g, bands, current) {
    g.save();
    g.font = `${MIN_FONT_PX - 1}px system-ui, sans-serif`;
    g.textAlign = 'center';
    g.textBaseline = 'middle';
    for (const b of bands) {
      g.fillStyle = b.s === current ? SPLIT_NOW : SPLIT_FILLS[b.s % 2];
      g.fillRect(b.x0, 0, b.x1 - b.x0, SPLIT_BAND - 2);
      const room = b.x1 - b.x0 - 4;
      const text = [`split ${b.s}`, `s${b.s}`, `${b.s}`].find((t) => g.measureText(t).width <= room);
      if (!text) continue;
      g.fillStyle = b.s === current ? '#2b1700' : '#6b3a00';
      g.fillText(text, (b.x0 + b.x1) / 2, (SPLIT_BAND - 2) / 2);
    }
    g.restore();
  }
}
