// The lanes of a roles trace (docs/ROLES.md, "Lanes under the SM
// timeline"): at a step, the block that ran it, one lane per warp role —
// the producer's copies and its waits for a free stage, each consumer's
// waits, turns, products, softmax and epilogue — and a derived lane of the
// time a product of either consumer was in flight. Every time drawn or
// written is read from the block's role records, in ns on the trace's one
// %globaltimer axis, counted from the block's first stamp.
import { showTip, hideTip } from './tooltip.js';
import { fmtBytes, MIN_FONT_PX, niceStep } from './format.js';
import { batchHead } from './steps.js';
import { rung } from './rungs.js';
import { blockOf, eventWords, isFreeWait, ns, pack, stepNote } from './role_spans.js';

// The lanes, top to bottom: a warp role's, or the derived one.
const LANES = [
  { name: 'producer', role: 'producer' },
  { name: 'consumer 0', role: 'consumer0' },
  { name: 'consumer 1', role: 'consumer1' },
  { name: 'products in flight', derived: true },
];

// mix is css colour c moved a fraction f of the way to white.
function mix(c, f) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c || '');
  const [r, g, b] = m ? m.slice(1).map((x) => parseInt(x, 16)) : [74, 20, 140];
  const to = (v) => Math.round(v + (255 - v) * f).toString(16).padStart(2, '0');
  return `#${to(r)}${to(g)}${to(b)}`;
}

// The look of each event: a fill, or a hatch (background, lines). The
// products take the rung's colour (S dark, P·V light).
function stylesFor(base) {
  const K = '#00796b', V = '#4db6ac';
  const wait = { hatch: ['#eeeeee', '#6f6f6f'] };
  const turn = { hatch: ['#ffffff', mix(base, 0.45)] };
  return {
    copy_q: { fill: '#78909c' }, copy_k: { fill: K }, copy_v: { fill: V },
    free_k: { hatch: ['#ffffff', K] }, free_v: { hatch: ['#ffffff', V] },
    wait_q: wait, wait_k: wait, wait_v: wait, turn_s: turn, turn_pv: turn,
    product_s: { fill: base }, product_pv: { fill: mix(base, 0.5) },
    softmax: { fill: '#f0a020' }, epilogue: { fill: '#9e9e9e' },
    inflight: { fill: mix(base, 0.25) },
  };
}

// The legend's entries, in the order drawn: which events each shows.
const LEGEND = [
  ['K copy', ['copy_k']], ['V copy', ['copy_v']], ['Q copy', ['copy_q']],
  ['wait for a free stage (K, V)', ['free_k', 'free_v']],
  ['wait for data', ['wait_q', 'wait_k', 'wait_v']],
  ['wait for a turn', ['turn_s', 'turn_pv']],
  ['S product', ['product_s']], ['P·V product', ['product_pv']],
  ['softmax', ['softmax']], ['epilogue', ['epilogue']],
];

const FONT = `${MIN_FONT_PX}px system-ui, sans-serif`;

// RoleLanes draws the lanes of step k's block into a canvas, writes what
// the step's spans say into a note, and goes to a span's step on a click.
export class RoleLanes {
  // held(bh, i, k) says whether a lesson's checkpoint asks about step k of
  // block (bh, i) and has not been answered: the note then keeps back how
  // much of each softmax ran under the other consumer's products.
  constructor(canvas, note, legend, title, onPick, held = () => false) {
    this.held = held;
    this.canvas = canvas;
    this.note = note;
    this.legend = legend;
    this.title = title;
    this.onPick = onPick;
    this.hits = [];
    this.cache = new Map(); // "bh,i" -> block (a trace's, until the model changes)
    canvas.addEventListener('mousemove', (ev) => {
      const hit = this.hitAt(ev);
      if (!hit) return hideTip();
      showTip(ev, this.tipOf(hit));
    });
    canvas.addEventListener('mouseleave', hideTip);
    canvas.addEventListener('click', (ev) => {
      const hit = this.hitAt(ev);
      const tile = hit?.span ? hit.span.tile : hit?.interval?.parts[0].tile;
      if (tile === undefined || !this.block) return;
      const k = this.model.stepOf.get(`${this.block.key},${tile}`);
      if (k !== undefined) this.onPick(k);
    });
  }

  // untaught puts in the lanes' place the lesson that explains them.
  untaught(text) {
    this.canvas.width = this.canvas.height = 0;
    this.canvas.style.height = '0';
    this.canvas.hidden = true;
    this.legend.replaceChildren();
    this.title.textContent = '';
    this.note.textContent = text;
  }

  hitAt(ev) {
    if (!this.layout) return null;
    const rect = this.canvas.getBoundingClientRect();
    const x = (ev.clientX - rect.left) * (this.layout.w / rect.width);
    const y = (ev.clientY - rect.top) * (this.layout.h / rect.height);
    let best = null, dist = Infinity;
    for (const h of this.hits) {
      if (y < h.y0 || y > h.y1) continue;
      const d = x < h.x0 ? h.x0 - x : x > h.x1 ? x - h.x1 : 0;
      if (d < dist) { dist = d; best = h; }
    }
    return dist <= 3 ? best : null;
  }

  tipOf(hit) {
    const when = (s, e) => `${Math.round(s)}–${Math.round(e)} ns from the block's start (${ns(e - s)})`;
    if (hit.interval) {
      const iv = hit.interval;
      const parts = iv.parts.map((x) => `${x.lane}'s ${x.event === 'product_s' ? 'S' : 'P·V'} of kv-tile ${x.j}`);
      return `products in flight: ${parts.join(', ')}\n${when(iv.s, iv.e)}\n` +
        'A product issued and not yet waited for, its queueing included: not the tensor cores\' busy cycles.';
    }
    const x = hit.span;
    const tile = x.j >= 0 ? `kv-tile ${x.j}` : x.tile >= 0 ? `before kv-tile ${x.tile}` : 'the epilogue';
    const bytes = x.r.bytesRead ? `, ${fmtBytes(x.r.bytesRead)}` : '';
    return `${x.lane}: ${eventWords(x.event, x.j)}, ${tile}${bytes}\n${when(x.s, x.e)}`;
  }

  // draw draws the block of step k of a complete trace; while records
  // still arrive the canvas only takes its room.
  draw(model, k, complete = true) {
    const c = this.canvas;
    c.hidden = false;
    if (this.model !== model) { this.model = model; this.cache.clear(); }
    const r = model.steps[k];
    if (!complete || !r) {
      c.style.height = '150px';
      this.hits = [];
      this.layout = null;
      this.note.textContent = 'The warp roles\' lanes are drawn once every record has arrived.';
      return;
    }
    const h = model.h;
    const key = `${r.bh},${r.i}`;
    if (!this.cache.has(key)) this.cache.set(key, blockOf(model, key));
    const b = this.cache.get(key);
    this.block = b;
    if (!b) {
      c.width = c.height = 0;
      c.style.height = '0';
      this.hits = [];
      this.layout = null;
      c.dataset.spans = '0';
      this.note.textContent = `No role records for ${batchHead(h, r.bh)}, q-tile ${r.i}.`;
      return;
    }
    const base = rung(h.variant)?.colour || '#4a148c';
    const style = stylesFor(base);
    const cur = r.j; // the step's kv-tile; −1: the epilogue

    // Tracks: spans that overlap in time share no track of a lane.
    const lanes = LANES.map((l) => {
      const spans = l.derived ? b.products.map((iv, order) => ({ ...iv, order, interval: iv })) : b.spans.filter((x) => x.lane === l.name);
      const tracks = pack(spans, (x) => (isFreeWait(x) ? 1 : 0));
      return { ...l, spans, tracks, trackH: tracks > 1 ? 11 : 20 };
    });
    const gap = 8, top = 4, axisH = 22;
    let y = top;
    for (const l of lanes) { l.y = y; l.h = l.tracks * l.trackH; y += l.h + gap; }
    const lanesBottom = y - gap;
    const hgt = lanesBottom + axisH;
    const w = Math.max(300, c.clientWidth || 800);
    const g0 = c.getContext('2d');
    g0.font = FONT;
    const widest = Math.max(...lanes.map((l) => g0.measureText(l.name).width));
    const left = Math.ceil(widest) + 12, width = w - left - 12;
    const X = (t) => left + t / Math.max(1, b.length) * width;
    this.layout = { w, h: hgt };

    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
    c.style.height = `${hgt}px`;
    const g = c.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, w, hgt);
    g.fillStyle = '#fafafa';
    for (const l of lanes) g.fillRect(left, l.y, width, l.h);

    // The step's own interval, as its timing record stamps it, shaded.
    const s0 = Number(r.tStart - b.t0), s1 = Number(r.tEnd - b.t0);
    g.fillStyle = '#eef3ff';
    g.fillRect(X(Math.max(0, s0)), top, Math.max(1, X(Math.min(b.length, s1)) - X(Math.max(0, s0))), lanesBottom - top);

    this.hits = [];
    let drawn = 0;
    const box = (l, x) => {
      const x0 = X(x.s), x1 = Math.max(X(x.e), x0 + 1);
      const y0 = l.y + x.track * l.trackH + 1, y1 = y0 + l.trackH - 2;
      return { x0, x1, y0, y1 };
    };
    const paint = (bx, st) => {
      const bw = bx.x1 - bx.x0, bh = bx.y1 - bx.y0;
      if (st.fill) {
        g.fillStyle = st.fill;
        g.fillRect(bx.x0, bx.y0, bw, bh);
        return;
      }
      const [bg, line] = st.hatch;
      g.save();
      g.beginPath();
      g.rect(bx.x0, bx.y0, bw, bh);
      g.clip();
      g.fillStyle = bg;
      g.fillRect(bx.x0, bx.y0, bw, bh);
      g.strokeStyle = line;
      g.lineWidth = 1;
      g.beginPath();
      for (let t = -bh; t < bw; t += 5) { g.moveTo(bx.x0 + t, bx.y1); g.lineTo(bx.x0 + t + bh, bx.y0); }
      g.stroke();
      g.restore();
      g.strokeStyle = line;
      g.lineWidth = 1;
      g.strokeRect(bx.x0 + 0.5, bx.y0 + 0.5, Math.max(0, bw - 1), Math.max(0, bh - 1));
    };
    // The other tiles' spans first, lighter; then the step's, outlined.
    const outlined = [];
    for (const l of lanes) {
      for (const x of l.spans) {
        const bx = box(l, x);
        const mine = l.derived ? x.interval.parts.some((p) => p.tile === cur) : x.tile === cur;
        g.globalAlpha = mine ? 1 : 0.35;
        paint(bx, l.derived ? style.inflight : style[x.event] || { fill: '#bbb' });
        g.globalAlpha = 1;
        if (mine) outlined.push(bx);
        this.hits.push({ ...bx, span: l.derived ? null : x, interval: l.derived ? x.interval : null });
        if (!l.derived) drawn++;
      }
    }
    g.strokeStyle = '#111';
    g.lineWidth = 1.5;
    for (const bx of outlined) g.strokeRect(bx.x0 - 0.75, bx.y0 - 0.75, bx.x1 - bx.x0 + 1.5, bx.y1 - bx.y0 + 1.5);

    // A rule at the step's start, as the SM timeline has.
    if (s0 >= 0 && s0 <= b.length) {
      g.strokeStyle = 'rgba(0,0,0,0.55)';
      g.lineWidth = 1;
      g.setLineDash([4, 3]);
      g.beginPath();
      g.moveTo(Math.round(X(s0)) + 0.5, 0);
      g.lineTo(Math.round(X(s0)) + 0.5, lanesBottom);
      g.stroke();
      g.setLineDash([]);
    }

    // Lane labels, right-aligned in the margin; the time axis in ns.
    g.fillStyle = '#333';
    g.font = FONT;
    g.textBaseline = 'middle';
    g.textAlign = 'right';
    for (const l of lanes) g.fillText(l.name, left - 6, l.y + l.h / 2);
    g.textBaseline = 'top';
    g.textAlign = 'center';
    // Round ticks, each labelled where its label keeps clear of the last.
    const step = niceStep(b.length / Math.max(2, Math.floor(width / 110)));
    let clear = -Infinity;
    for (let t = 0; t <= b.length + 1e-9; t += step) {
      const x = X(t);
      g.fillRect(x, lanesBottom, 1, 4);
      const text = `${t} ns`;
      const tw = g.measureText(text).width;
      const at = Math.min(Math.max(x, left + tw / 2), left + width - tw / 2);
      if (at - tw / 2 < clear + 8) continue;
      g.fillText(text, at, lanesBottom + 6);
      clear = at + tw / 2;
    }

    // What tests read: the lanes, the spans drawn, the labels' size and room.
    c.dataset.lanes = lanes.map((l) => l.name).join(',');
    c.dataset.spans = String(drawn);
    c.dataset.inFlight = String(b.products.length);
    c.dataset.block = b.key;
    c.dataset.tile = String(cur);
    c.dataset.fontPx = String(MIN_FONT_PX);
    c.dataset.labelRoom = String(Math.floor(left - 6 - widest));
    // Where time and the lanes lie, in CSS pixels: the axis's left edge
    // and width (0 ns to the block's length), each lane's top and height.
    c.dataset.axis = `${left} ${width} ${b.length}`;
    c.dataset.laneBoxes = lanes.map((l) => `${l.y} ${l.h}`).join(';');

    this.title.textContent = `Warp roles of the block of this step: ${batchHead(h, r.bh)}, q-tile ${r.i}, on SM ${b.sm}; ` +
      `${(b.length / 1000).toFixed(1)} µs from its first stamp to its last, in ns from the block's start.`;
    this.drawLegend(b, style);
    this.note.textContent = stepNote(b, cur, this.held(r.bh, r.i, k + 1));
  }

  drawLegend(b, style) {
    const present = new Set(b.spans.map((x) => x.event));
    const swatch = (st) => {
      const i = document.createElement('i');
      if (st.fill) i.style.background = st.fill;
      else {
        const [bg, line] = st.hatch;
        i.style.background = `repeating-linear-gradient(135deg, ${line} 0 1px, ${bg} 1px 4px)`;
        i.style.borderColor = line;
      }
      return i;
    };
    const items = [];
    for (const [label, events] of LEGEND) {
      const e = events.find((x) => present.has(x));
      if (!e) continue;
      const s = document.createElement('span');
      s.append(swatch(style[e]), label);
      items.push(s);
    }
    const s = document.createElement('span');
    s.append(swatch(style.inflight), 'a product in flight (issued, not yet waited for; queueing included — not the tensor cores\' busy cycles)');
    items.push(s);
    this.legend.replaceChildren(...items);
  }
}
