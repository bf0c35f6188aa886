// Naive against flash on the same inputs, stepped together. Each pane's steps
// get a place on one progress axis: from 0 to 1, the fraction of its score
// tiles computed so far; from 1 to 2, its steps after the last score tile
// (naive's softmax and P·V, flash's last epilogue). One click moves the axis
// to the next place either kernel has, so each pane shows its state at the
// same progress.
import { startRun } from './stream.js';
import { TraceModel } from './model.js';
import { TileGrid } from './tilegrid.js';
import { fmtBytes } from './format.js';
import { describe } from './steps.js';
import { reportSize, waitsToBeWanted, whenWanted } from './embed.js';
import { gradients } from './backward_model.js';
import { cumulative, keysOf, positionsOf, reference, stepAt } from './compare_axis.js';
import { drawMemory, largestBuffer } from './compare_memory.js';
import { scoresShape } from './shape.js';
import { Knowledge, taughtUpTo } from './taught.js';
import { apiFetch, call, embedded, fillForm, onSite, siteData, siteURL } from './site.js';

const $ = (id) => document.getElementById(id);
const page = onSite && location.search ? await siteComparePage() : JSON.parse($('compare-data').textContent);

// siteComparePage: on the static site the side by side is one page for
// every URL; its state comes from the site's data (for the pages' own
// links) or the worker, which reads the URL as the server does
// (api.Compare), and is filled in here.
async function siteComparePage() {
  const q = location.search.slice(1);
  let st;
  try {
    st = (await siteData('compares'))[q] ?? JSON.parse(await call('get', ['/compare', q]));
  } catch (e) {
    document.getElementById('c-summary-line').textContent = `This page could not read its run: ${e.message}`;
    return { valid: false, flash_query: '', naive_query: '', step: 1, pair: 'f32', embed: false };
  }
  fillForm(document.getElementById('compare-form'), { ...st.values, pair: st.values.pair || 'f32' }, st.errors);
  document.getElementById('c-summary-line').textContent = st.data.valid ? st.summary : 'not run yet: fix the fields below';
  document.getElementById('c-settings').open = !st.data.valid;
  if (st.errors.form) {
    const p = document.createElement('p');
    p.className = 'form-error';
    p.id = 'cerr-form';
    p.dataset.field = 'form';
    p.setAttribute('role', 'alert');
    p.textContent = `${st.errors.form}.`;
    if (st.offer) {
      const a = document.createElement('a');
      a.href = siteURL(st.offer);
      a.className = 'button';
      a.textContent = st.offer_text;
      p.append(' ', a);
    }
    document.getElementById('c-settings').after(p);
  }
  if (st.data.embed) embedded();
  return st.data;
}
// A lesson's frame says how far its course has gone (taught=N): the panes
// tell their steps in the words read so far.
const know = new Knowledge(taughtUpTo(location.search));
// The backward pair: flash2_bwd recomputes P, naive_bwd reads it back.
const backwardPair = () => page.pair === 'bwd';

const panes = {};
let positions = []; // the progress values either kernel reaches, sorted
let at = 0; // index into positions
let timer = null;

function makePane(variant, query) {
  const el = $(`pane-${variant}`);
  const q = (role) => el.querySelector(`[data-role=${role}]`);
  const p = {
    variant, query, el, model: null, done: false, traffic: null, keys: [],
    grid: new TileGrid(q('grid'), q('legend'), () => {}, know),
    memory: q('memory'),
    status: q('status'), title: q('title'), l2: q('l2'), dram: q('dram'), buffer: q('buffer'), measured: q('measured'),
  };
  panes[variant]?.run?.detach();
  panes[variant] = p;
  el.querySelector('.memory-figure figcaption').textContent = backwardPair() ? 'Where P, dP and dS live, to scale' : 'Where S and P live, to scale';
  p.status.textContent = 'Starting…';
  // A pane replaced by a newer run ignores what its old run still sends.
  const current = () => panes[variant] === p;
  apiFetch(`/api/traffic?${query}`).then((r) => r.json()).then((t) => { if (current()) { p.traffic = t; finish(); } });
  p.run = startRun(query, {
    onHeader(h) {
      if (!current()) return;
      p.model = new TraceModel(h);
      // The heading's "N×N buffers" are Nq×N with fewer queries than keys.
      const words = el.querySelector('.pane-memory');
      if (words) {
        words.dataset.words ??= words.textContent;
        words.textContent = words.dataset.words.replace('N×N', scoresShape(h));
      }
    },
    onRecord(r) {
      if (!current()) return;
      p.model.add(r);
      if (p.model.length % 64 === 0) p.status.textContent = `Streaming: ${p.model.length} steps…`;
    },
    onQueued(ahead) {
      if (!current()) return;
      p.status.textContent = ahead < 0 ? 'Computing…' : ahead === 0 ? 'Waiting: this run is next on the server.' : `Waiting: ${ahead} run${ahead === 1 ? '' : 's'} ahead of this one.`;
    },
    onDone() {
      if (!current() || !p.model) return;
      p.done = true;
      p.status.textContent = `${p.model.length} steps, numbers from ${p.model.h.label}.`;
      finish();
    },
    onError(msg) { p.status.textContent = msg; p.status.classList.add('error'); },
  });
}

function finish() {
  const ps = Object.values(panes);
  if (!ps.every((p) => p.done && p.traffic)) return;
  for (const p of ps) {
    p.keys = keysOf(p.model);
    p.cumDRAM = cumulative(p.traffic.steps);
  }
  positions = positionsOf(ps.map((p) => p.keys));
  $('c-scrub').max = String(positions.length);
  $('c-status').textContent = 'Both traces are in: step them together.';
  go(Math.min(page.step - 1, positions.length - 1));
  summary();
}

function go(i) {
  at = Math.max(0, Math.min(i, positions.length - 1));
  $('c-scrub').value = String(at + 1);
  const x = positions[at];
  const tiles = backwardPair() ? 'tiles (flash: S recomputed; naive: dP written)' : 'score tiles';
  $('c-progress').textContent = x <= 1
    ? `${Math.round(x * 100)}% of ${tiles} computed`
    : `all ${tiles} computed; finishing: ${Math.round((x - 1) * 100)}%`;
  const ks = {};
  for (const p of Object.values(panes)) {
    ks[p.variant] = stepAt(p.keys, positions[at]);
    drawPane(p, ks[p.variant]);
  }
  drawRace(ks);
  document.dispatchEvent(new CustomEvent('flashstep:step', { detail: { step: at + 1, total: positions.length, query: page.flash_query } }));
  const q = new URLSearchParams(page.flash_query);
  q.delete('variant');
  if (page.pair && page.pair !== 'f32') q.set('pair', page.pair);
  if (page.embed) q.set('embed', '1');
  if (know.upTo < Infinity) q.set('taught', String(know.upTo));
  q.set('step', String(at + 1));
  history.replaceState(null, '', `${location.pathname}?${q}`); // a room's /r/… path stays
  if (page.embed && window.parent !== window) {
    window.parent.postMessage({ type: 'flashstep-step', step: at + 1, total: positions.length }, location.origin);
  }
}

// drawRace draws each kernel's device-memory traffic so far as one bar on
// one scale, and the ratio of the bytes they wrote in large type: the point
// of the page at a glance.
function drawRace(ks) {
  const sofar = (p, k) => (k < 0 ? { r: 0, w: 0 } : { r: p.model.cumRead[k], w: p.model.cumWritten[k] });
  const end = (p) => sofar(p, p.model.length - 1);
  const n = panes.naive, f = panes.flash2;
  const scale = Math.max(1, end(n).r + end(n).w, end(f).r + end(f).w);
  for (const p of [n, f]) {
    const t = sofar(p, ks[p.variant]);
    const row = document.querySelector(`.race-row.${p.variant}`);
    row.querySelector('.race-w').style.width = `${(100 * t.w) / scale}%`;
    row.querySelector('.race-r').style.width = `${(100 * t.r) / scale}%`;
    row.querySelector('.race-value').textContent = `${fmtBytes(t.w)} written, ${fmtBytes(t.r)} read`;
  }
  const nw = sofar(n, ks.naive).w, fw = sofar(f, ks.flash2).w;
  const ratio = $('c-ratio'), words = $('c-ratio-words');
  if (nw === 0 && fw === 0) {
    ratio.textContent = '–';
    words.textContent = backwardPair()
      ? `Step forward: the naive backward writes dP and dS, ${n.model ? scoresShape(n.model.h) : 'N×N'} each, to device memory; flash writes D and the gradients.`
      : 'Step forward: naive writes every score to device memory; flash writes only its output.';
  } else if (fw === 0) {
    ratio.textContent = `${fmtBytes(nw)} : 0 B`;
    words.textContent = 'naive has written S to device memory; flash has written nothing yet: its S and P never leave the chip, and O leaves once per q-tile.';
  } else {
    const x = nw / fw;
    ratio.textContent = `${x >= 10 ? Math.round(x) : x.toFixed(1)}×`;
    words.textContent = `the bytes naive wrote to device memory (${fmtBytes(nw)}) for each byte flash wrote (${fmtBytes(fw)})${at === positions.length - 1 ? ', the whole run' : ', so far'}.`;
  }
}

function drawPane(p, k) {
  const h = p.model.h;
  const states = k >= 0 ? p.model.tileStates(k) : new Array(h.Tr * h.Tc).fill('pending');
  p.grid.draw(h, states);
  drawMemory(p.memory, h, states, backwardPair());
  if (k < 0) {
    p.title.textContent = 'Not started.';
    p.l2.textContent = p.dram.textContent = '0 B read, 0 B written';
  } else {
    const r = p.model.steps[k];
    p.title.textContent = `Step ${k + 1} of ${p.model.length}: ${describe(h, r, know)[0]}`;
    p.l2.textContent = `${fmtBytes(p.model.cumRead[k])} read, ${fmtBytes(p.model.cumWritten[k])} written`;
    const c = p.cumDRAM[k];
    p.dram.textContent = `${fmtBytes(c[2])} read, ${fmtBytes(c[3])} written`;
  }
  p.buffer.textContent = largestBuffer(h, backwardPair());
  const m = p.traffic.measured;
  p.measured.textContent = m
    ? `Measured on ${m.gpu} (${m.recorded}) for this run: ` + m.measured.map((x) => `${x.kernel} L2 ${fmtBytes(x.l2_read)} read, DRAM ${fmtBytes(x.dram_read)} read, ${fmtBytes(x.dram_write)} written`).join('; ')
    : `DRAM by the model of an ${p.traffic.model.Name} (${fmtBytes(p.traffic.model.L2Bytes)} of L2); no hardware counters were recorded for this run.`;
}

// summary compares the two outputs with each other and with float64.
function summary() {
  const f = panes.flash2.model, n = panes.naive.model;
  const h = f.h;
  const lines = [];
  if (backwardPair()) {
    // The two backwards' gradients against each other: one recomputed P
    // from L, the other read the exact P back.
    for (let bh = h.tracedBH[0]; bh < h.tracedBH[1]; bh++) {
      const gf = gradients(f, bh), gn = gradients(n, bh);
      if (!gf || !gn) continue;
      for (const name of ['dq', 'dk', 'dv']) {
        let diff = 0, norm = 0;
        for (let x = 0; x < gf[name].length; x++) {
          diff = Math.max(diff, Math.abs(gf[name][x] - gn[name][x]));
          norm = Math.max(norm, Math.abs(gn[name][x]));
        }
        const label = { dq: 'dQ', dk: 'dK', dv: 'dV' }[name];
        lines.push([`batch-head ${bh}: max |${label}_flash − ${label}_naive|`, diff.toExponential(2), `diff-${name}`],
          [`max |${label}|`, norm.toExponential(2), '']);
      }
    }
    showSummary(lines, 'Gradients');
    return;
  }
  for (let bh = h.tracedBH[0]; bh < h.tracedBH[1]; bh++) {
    const of = f.finalO.get(bh), on = n.finalO.get(bh);
    const inp = f.inputs.get(bh);
    if (!of || !on || !inp) continue;
    const ref = reference(inp, h);
    let diff = 0, ef = 0, en = 0, norm = 0;
    const rows = [h.tracedQ[0] * h.Br, Math.min(h.Nq, h.tracedQ[1] * h.Br)]; // query rows
    for (let x = rows[0] * h.D; x < rows[1] * h.D; x++) {
      diff = Math.max(diff, Math.abs(of[x] - on[x]));
      ef = Math.max(ef, Math.abs(of[x] - ref[x]));
      en = Math.max(en, Math.abs(on[x] - ref[x]));
      norm = Math.max(norm, Math.abs(ref[x]));
    }
    lines.push([`batch-head ${bh}: max |O_flash − O_naive|`, diff.toExponential(2), 'diff-flash-naive'],
      ['max |O_flash − O_float64|', ef.toExponential(2), 'diff-flash-ref'],
      ['max |O_naive − O_float64|', en.toExponential(2), 'diff-naive-ref'],
      ['max |O_float64|', norm.toExponential(2), '']);
  }
  showSummary(lines, 'Outputs');
}

function showSummary(lines, heading) {
  $('c-summary').querySelector('h2').textContent = heading;
  const dl = $('c-diffs');
  dl.replaceChildren();
  for (const [k, v, id] of lines) {
    dl.appendChild(document.createElement('dt')).textContent = k;
    const dd = dl.appendChild(document.createElement('dd'));
    dd.textContent = v;
    if (id) dd.dataset.testid = id;
  }
  $('c-summary').hidden = false;
}

// ---- controls ----

function pause() {
  clearInterval(timer);
  timer = null;
  $('c-play').classList.remove('playing');
}
function play() {
  if (timer || !positions.length) return;
  if (at >= positions.length - 1) go(0);
  timer = setInterval(() => (at >= positions.length - 1 ? pause() : go(at + 1)), 400);
  $('c-play').classList.add('playing');
}
$('c-first').onclick = () => { pause(); go(0); };
$('c-prev').onclick = () => { pause(); go(at - 1); };
$('c-next').onclick = () => { pause(); go(at + 1); };
$('c-last').onclick = () => { pause(); go(positions.length - 1); };
$('c-play').onclick = () => (timer ? pause() : play());
$('c-scrub').oninput = (ev) => { pause(); go(Number(ev.target.value) - 1); };
window.addEventListener('message', (ev) => {
  if (ev.origin !== location.origin || ev.data?.type !== 'flashstep-go' || !positions.length) return;
  pause();
  go(Number(ev.data.step) - 1);
});
window.addEventListener('resize', () => { if (positions.length) go(at); });
document.addEventListener('flashstep:go', (ev) => { if (positions.length) { pause(); go(Number(ev.detail.step) - 1); } });

// A new run for both panes (a classroom's presenter moving the room on):
// the query names the run; each pane takes it with its own kernel.
document.addEventListener('flashstep:run', (ev) => {
  const q = new URLSearchParams(ev.detail.query);
  q.delete('step');
  // The room keeps the page's pair: float32, bf16 on tensor cores, or the
  // backward pass.
  const [flashV, naiveV] = { bf16: ['flash2_fast', 'naive_mma'], bwd: ['flash2_bwd', 'naive_bwd'] }[page.pair] ?? ['flash2', 'naive'];
  q.set('variant', flashV);
  const flash = q.toString();
  q.set('variant', naiveV);
  const naive = q.toString();
  if (flash === page.flash_query && positions.length) return go(Number(ev.detail.step ?? 1) - 1);
  pause();
  page.flash_query = flash;
  page.naive_query = naive;
  page.step = Number(ev.detail.step ?? 1);
  page.valid = true;
  positions = [];
  at = 0;
  $('c-summary').hidden = true;
  $('c-status').classList.remove('error');
  $('c-status').textContent = 'Running both kernels…';
  makePane('naive', naive);
  makePane('flash2', flash);
});
document.addEventListener('keydown', (ev) => {
  if (ev.target.closest('input, select, textarea')) return;
  const f = { ArrowLeft: $('c-prev').onclick, ArrowRight: $('c-next').onclick, Home: $('c-first').onclick, End: $('c-last').onclick, ' ': $('c-play').onclick }[ev.key];
  if (f) { ev.preventDefault(); f(); }
});

if (page.valid) {
  // Framed in a lesson, the runs wait until the frame comes into view.
  if (waitsToBeWanted()) $('c-status').textContent = 'These runs start when the lesson reaches them.';
  whenWanted().then(() => {
    $('c-status').textContent = 'Running both kernels…';
    makePane('naive', page.naive_query);
    makePane('flash2', page.flash_query);
  });
} else {
  const err = document.getElementById('cerr-form');
  $('c-status').textContent = err
    ? 'This run cannot be traced as it is: see above.'
    : 'Fix the highlighted fields to run.';
  $('c-status').classList.add('error');
}

if (page.embed) reportSize();
