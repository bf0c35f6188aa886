// The sweep page: start a sweep, follow its progress, cancel it, plot and
// tabulate its results beside PyTorch's recorded references (the charts:
// sweep_chart.js), and the memory calculator and the traffic table.
import { fmtBytes } from './format.js';
import { onCPU, plot } from './sweep_chart.js';
import { apiFetch, onSite, siteURL } from './site.js';

const $ = (id) => document.getElementById(id);
const page = JSON.parse($('sweep-data').textContent);
const state = { job: null, record: null, timer: null, sdpa: null };

// ---- running a sweep ----

function showErrors(form, fields) {
  const by = {};
  for (const f of fields || []) by[f.field] = f.message;
  for (const el of form.querySelectorAll('.field-error')) el.textContent = by[el.dataset.field] || '';
}

// The kernels' boxes carry no name: the form sends the ticked ones as one
// variants field, and none while they are the engine's default sweep (the
// forward pass's kernels), so that a default sweep's query stays the
// default's.
const kernelBoxes = () => [...document.querySelectorAll('#s-kernels input[data-variant]')];

$('s-engine').addEventListener('change', () => {
  const defaults = page.default_variants[$('s-engine').value] || [];
  for (const box of kernelBoxes()) if (!box.hasAttribute('data-backward')) box.checked = defaults.includes(box.dataset.variant);
});

$('sweep-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = new URLSearchParams();
  for (const [k, v] of new FormData(ev.target)) if (String(v).trim() !== '') body.set(k, String(v).trim());
  const ticked = kernelBoxes().filter((b) => b.checked).map((b) => b.dataset.variant);
  if (!ticked.length) {
    showErrors(ev.target, [{ field: 'variants', message: 'tick at least one kernel' }]);
    $('sweep-status').textContent = 'No kernel is ticked.';
    return;
  }
  const defaults = page.default_variants[body.get('engine') || 'gpu'] || [];
  if (ticked.join(',') !== defaults.join(',')) body.set('variants', ticked.join(','));
  const res = await apiFetch('/api/sweeps', { method: 'POST', body });
  const job = await res.json();
  if (!res.ok) {
    showErrors(ev.target, job.fields);
    $('sweep-status').textContent = job.error;
    return;
  }
  showErrors(ev.target, []);
  follow(job);
});

$('sweep-cancel').addEventListener('click', async () => {
  if (!state.job) return;
  const res = await fetch(`/api/sweeps/${state.job.id}`, { method: 'DELETE' });
  if (res.ok) follow(await res.json());
});

$('sweep-recorded')?.addEventListener('click', showRecorded);

// follow polls a job until it is over, redrawing as its points come in.
function follow(job) {
  clearTimeout(state.timer);
  state.job = job;
  const over = ['done', 'cancelled', 'failed'].includes(job.state);
  $('sweep-progress').max = job.total || 1;
  $('sweep-progress').value = job.done;
  const eta = Math.round(job.estimate_ns / 1e9);
  $('sweep-status').textContent = {
    queued: `Queued: ${job.ahead} sweep${job.ahead === 1 ? '' : 's'} ahead of this one.`,
    running: `Running: ${job.done} of ${job.total} points (about ${eta} s in all).`,
    done: `Done: ${job.total} points.`,
    cancelled: `Cancelled after ${job.done} of ${job.total} points.`,
    failed: `Failed: ${job.error}`,
  }[job.state] + memoryNote(job);
  $('sweep-cancel').disabled = over;
  $('sweep-run').disabled = !over;
  showRecord({ source: job.source, results: job.results, state: job.state }, `/api/sweeps/${job.id}`);
  if (!over) state.timer = setTimeout(async () => follow(await (await fetch(`/api/sweeps/${job.id}`)).json()), 500);
}

function memoryNote(job) {
  const m = job.memory;
  if (!m || !['done', 'cancelled', 'failed'].includes(job.state)) return '';
  const diff = m.free_before - m.free_after;
  return ` Device memory free before the sweep ${fmtBytes(m.free_before)}, after ${fmtBytes(m.free_after)}` +
    (diff === 0 ? ': all of it given back.' : `: ${fmtBytes(Math.abs(diff))} ${diff > 0 ? 'not given back' : 'more'}.`);
}

async function showRecorded() {
  const rec = await (await apiFetch('/api/sweeps/recorded')).json();
  $('sweep-status').textContent = '';
  $('sweep-progress').value = 0;
  showRecord(rec, '/api/sweeps/recorded', `Recorded on ${rec.source}, ${rec.recorded.slice(0, 10)}`);
}

// ---- results ----

function showRecord(rec, base, title) {
  state.record = rec;
  $('sweep-title').textContent = title || 'Results';
  // A recording's title already names where it was measured.
  $('sweep-source').textContent = title ? '' : `Measured on: ${rec.source}.`;
  $('sweep-how').textContent = howMeasured(rec);
  $('sweep-downloads').innerHTML = '';
  for (const [ext, label] of [['csv', 'Download CSV'], ['json', 'Download JSON']]) {
    const a = document.createElement('a');
    // The site holds the recorded sweep's two files among its data.
    a.href = onSite && base === '/api/sweeps/recorded' ? siteURL(`/data/sweeps-recorded.${ext}`) : `${base}.${ext}`;
    a.textContent = label;
    a.download = '';
    a.dataset.testid = `download-${ext}`;
    $('sweep-downloads').append(a);
  }
  const ds = [...new Set(rec.results.map((r) => r.d))].sort((a, b) => a - b);
  const sel = $('f-d');
  const keep = sel.value;
  sel.replaceChildren(...ds.map((d) => new Option(String(d), String(d))));
  if (ds.includes(Number(keep))) sel.value = keep;
  draw();
}

// howMeasured says how this record's points were taken, from the points
// themselves: its shapes, its clock, and what its memory column means.
function howMeasured(rec) {
  const rs = rec.results;
  if (!rs.length) return '';
  const shapes = [...new Set(rs.map((r) => `B=${r.b}, H=${r.h}`))];
  const bench = rs.every((r) => r.b === Math.max(1, Math.floor(16384 / r.n)) && r.h === Math.max(1, Math.floor(2048 / r.d)));
  const shape = bench && shapes.length > 1
    ? 'the FlashAttention benchmark shapes, B = 16384/N (at least 1) and H = 2048/d'
    : shapes.join('; ');
  const reps = Math.max(...rs.map((r) => r.repeats_ms?.length || 0));
  const bwd = !hasBackward(rec) ? '' : onCPU(rec)
    ? ' A backward point is one backward pass, its inputs included (the exact forward, in float64); its FLOPs are 2.5× the forward\'s.'
    : ' A backward point is every kernel of one backward pass; its FLOPs are 2.5× the forward\'s, as FlashAttention counts them.';
  if (onCPU(rec)) {
    return `Each point is the median of ${reps} wall-clock timings of the Go mirror after a warm-up, at ${shape}. ` +
      'The mirror builds every trace record as it goes, so these times show how the work grows with N, not a GPU\'s speed; ' +
      'PyTorch\'s H100 references are left off these axes. The memory column is the model\'s: what each run would hold on a GPU.' + bwd;
  }
  return `Each point is the median of ${reps} CUDA-event timings after a warm-up, each on fresh inputs, at ${shape}. ` +
    'The memory column is the drop in free device memory once the run\'s buffers were allocated.' + bwd;
}

// A point's pass: a record from before the sweep timed backward kernels
// names none, and is the forward's.
const passOf = (r) => r.pass || 'forward';
const hasBackward = (rec) => rec.results.some((r) => passOf(r) === 'backward');

$('f-d').addEventListener('change', draw);
$('f-causal').addEventListener('change', draw);
$('f-pass').addEventListener('change', draw);

function draw() {
  const rec = state.record;
  if (!rec) return;
  const d = Number($('f-d').value);
  const causal = $('f-causal').value === 'true';
  // Both passes in one record: the pass filter shows, and picks the lines.
  const passes = new Set(rec.results.map(passOf));
  $('f-pass-box').hidden = passes.size < 2;
  const pass = passes.size < 2 ? [...passes][0] || 'forward' : $('f-pass').value;
  const pts = rec.results.filter((r) => r.d === d && r.causal === causal && (pass === 'both' || passOf(r) === pass));
  const empty = !pts.some((r) => !r.out_of_memory && !r.error && r.ms > 0);
  $('sweep-charts').hidden = empty;
  $('sweep-empty').hidden = !empty;
  $('sweep-empty').textContent = rec.results.length === 0
    ? (rec.state === 'cancelled' ? 'The sweep was cancelled before its first point: nothing to plot.' : 'No points yet.')
    : `No timed points for d=${d}, ${causal ? 'causal' : 'no mask'}${pass === 'both' ? '' : `, ${pass} pass`}.`;
  const series = {};
  const add = (name, n, ms, tflops, dashed, backward) => {
    series[name] ??= { name, dashed, backward, points: [] };
    series[name].points.push({ n, ms, tflops });
  };
  for (const r of pts) if (!r.out_of_memory && !r.error && r.ms > 0) add(`${r.variant}`, r.n, r.ms, r.tflops, false, passOf(r) === 'backward');
  captions(pts);
  // PyTorch's references, where they were measured for these shapes, and
  // only beside GPU timings: a CPU mirror's milliseconds are another axis.
  // They are forward passes: a chart of backward passes alone leaves them
  // off.
  if (!onCPU(rec) && pass !== 'backward') {
    for (const row of state.sdpa || []) {
      if (row.d !== d || row.causal !== causal) continue;
      for (const [key, name] of [['flash', 'SDPA flash (bf16)'], ['cudnn', 'SDPA cuDNN (bf16)'], ['naive', 'PyTorch naive (bf16)']]) {
        if (row[key]?.ms) add(name, row.N, row[key].ms, row[key].tflops, true);
      }
    }
  }
  const oom = pts.filter((r) => r.out_of_memory);
  const ns = [...new Set(pts.map((r) => r.n))].sort((a, b) => a - b);
  const failed = pts.filter((r) => r.error && !r.out_of_memory).map((r) => `${r.variant} at N=${r.n}: ${r.error}`);
  $('sweep-oom').textContent = failed.join('; ');
  // Each chart and the table a task of its own: together they held the
  // page's main thread for 0.3 s as it opened. A newer drawing drops the
  // parts of an older one not yet done.
  const seq = ++drawSeq;
  $('sweep-charts').dataset.drawn = '0'; // '1' once the charts and the table are drawn
  const parts = [
    () => !empty && plot('ms', 'chart-ms', series, 'ms', oom, ns, rec),
    () => !empty && plot('tflops', 'chart-tflops', series, 'TFLOP/s', oom, ns, rec),
    () => table(pts, rec.results.length, d, causal, rec),
  ];
  const next = () => {
    if (seq !== drawSeq || !parts.length) return;
    parts.shift()();
    if (parts.length) setTimeout(next, 0);
    else $('sweep-charts').dataset.drawn = '1';
  };
  next();
}

let drawSeq = 0;

// captions name the pass the charts show; with a backward line, the
// throughput's caption says how its FLOPs are counted, since a backward
// line at the same height as a forward one did 2.5 times the work.
function captions(pts) {
  const fwd = pts.some((r) => passOf(r) === 'forward');
  const bwd = pts.some((r) => passOf(r) === 'backward');
  $('cap-ms').textContent = fwd && bwd
    ? 'Time per pass (ms), backward dotted, log scales'
    : `Time per ${bwd ? 'backward' : 'forward'} pass (ms), log scales`;
  $('cap-tflops').textContent = bwd
    ? 'Throughput (TFLOP/s), log scales; backward FLOPs 2.5× the forward\'s'
    : 'Throughput (TFLOP/s), log scales';
}

// fmtRate writes a throughput with three significant figures, however small:
// a CPU mirror's 0.0021 TFLOP/s is not 0.00.
function fmtRate(x) {
  if (!(x > 0)) return '';
  return x >= 100 ? x.toFixed(0) : Number(x.toPrecision(3)).toString();
}

function table(results, all, d, causal, rec) {
  const t = $('sweep-table');
  t.replaceChildren();
  // A record with backward points says each row's pass, in a column of its
  // own beside the kernel's name.
  const passes = hasBackward(rec);
  const counted = passes ? ' A backward row\'s TFLOP/s count 2.5× the forward\'s FLOPs.' : '';
  t.createCaption().textContent = `d=${d}, ${causal ? 'causal' : 'no mask'}: ${results.length} of ${all} points (every point is in the downloads).${counted}`;
  const head = t.createTHead().insertRow();
  const memory = onCPU(rec) ? 'device memory (model)' : 'device memory';
  for (const h of ['variant', ...(passes ? ['pass'] : []), 'kernel', 'dtype', 'N', 'd', 'B', 'H', 'causal', 'ms', 'TFLOP/s', memory]) {
    head.appendChild(document.createElement('th')).textContent = h;
  }
  const body = t.createTBody();
  for (const r of results) {
    const row = body.insertRow();
    const cells = [r.variant, ...(passes ? [passOf(r)] : []), r.kernel, r.dtype, r.n, r.d, r.b, r.h, r.causal ? 'yes' : 'no',
      r.out_of_memory ? 'out of memory' : r.error ? 'error' : r.ms.toPrecision(4),
      r.out_of_memory || r.error ? '' : fmtRate(r.tflops), r.peak_bytes ? fmtBytes(r.peak_bytes) : ''];
    for (const c of cells) row.insertCell().textContent = String(c);
    if (r.peak_how) row.title = `memory: ${r.peak_how}`;
  }
}

// ---- the memory calculator ----

let memSeq = 0;
async function calc() {
  const seq = ++memSeq;
  const q = new URLSearchParams(new FormData($('memory-form')));
  const res = await apiFetch(`/api/memory?${q}`);
  const body = await res.json();
  if (seq !== memSeq) return;
  showErrors($('memory-form'), res.ok ? [] : body.fields);
  const out = $('memory-out');
  out.replaceChildren();
  if (!res.ok) return;
  const p = body.plan;
  const rows = [
    ['GPU', body.gpu, ''],
    ['Q, K, V, O, LSE (both kernels)', `${fmtBytes(p.inputs_bytes)} (${p.dtype === 'bf16' ? 'Q, K, V, O in bf16' : 'all float32'}; the LSE float32)`, ''],
    ['naive: S and P in device memory', `${fmtBytes(p.naive_sp_bytes)} (S float32, P ${p.dtype === 'bf16' ? 'bf16' : 'float32'})`, 'naive-sp'],
    ['naive in all', `${fmtBytes(p.naive_bytes)} ${p.naive_fits ? 'fits' : 'does not fit'}`, 'naive-total'],
    ['flash in all', `${fmtBytes(p.flash_bytes)} ${p.flash_fits ? 'fits' : 'does not fit'}`, ''],
    ['flash: one block\'s tiles, on chip', `${fmtBytes(p.flash_tile_bytes)} of shared memory (Br=Bc=64)`, ''],
    ['naive stops fitting at', `N > ${p.naive_max_n} (with B=${p.B}, H=${p.H}, d=${p.D})`, 'naive-max'],
    ['flash stops fitting at', `N > ${p.flash_max_n}`, ''],
  ];
  for (const [k, v, id] of rows) {
    out.appendChild(document.createElement('dt')).textContent = k;
    const dd = out.appendChild(document.createElement('dd'));
    dd.textContent = v;
    if (id) dd.dataset.testid = `mem-${id}`;
  }
}
$('memory-form').addEventListener('input', calc);

// ---- traffic: model against counters ----

async function traffic() {
  const rows = await (await apiFetch('/api/traffic/measured')).json();
  const t = $('traffic-table');
  t.replaceChildren();
  if (!rows.length) {
    t.createCaption().textContent = 'No counters were recorded with this build.';
    return;
  }
  t.createCaption().textContent = `Measured with Nsight Compute on ${rows[0].gpu}, ${rows[0].recorded}. Model / counter.`;
  const head = t.createTHead().insertRow();
  for (const h of ['run', 'kernel', 'L2 read: model', 'counter', 'DRAM read: model', 'counter', 'DRAM write: model', 'counter']) {
    head.appendChild(document.createElement('th')).textContent = h;
  }
  const body = t.createTBody();
  for (const run of rows) {
    const q = new URLSearchParams(run.query);
    // A run's query leaves out fields at their defaults (batch and heads 1).
    const name = `${q.get('variant')} N=${q.get('n')} d=${q.get('d')} B=${q.get('batch') ?? 1} H=${q.get('heads') ?? 1}${q.get('causal') === '1' ? ' causal' : ''}`;
    for (const meas of run.measured) {
      const model = run.model.find((k) => k.kernel === meas.kernel) || {};
      const row = body.insertRow();
      for (const c of [name, meas.kernel, fmtBytes(model.l2_read ?? 0), fmtBytes(meas.l2_read), fmtBytes(model.dram_read ?? 0),
        fmtBytes(meas.dram_read), fmtBytes(model.dram_write ?? 0), fmtBytes(meas.dram_write)]) row.insertCell().textContent = c;
    }
  }
}

// ---- start ----

(async () => {
  state.sdpa = await apiFetch('/api/sdpa').then((r) => (r.ok ? r.json() : null)).catch(() => null);
  calc();
  traffic();
  if (page.has_recorded) showRecorded();
})();
