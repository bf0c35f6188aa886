// The SM timeline of a GPU run: each traced step as a mark on its SM's row,
// from its start to its end as the GPU's %globaltimer saw them.

import { batchHead } from './steps.js';
import { MIN_FONT_PX, niceStep } from './format.js';
import { showTip, hideTip } from './tooltip.js';

const d3 = globalThis.d3;

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
