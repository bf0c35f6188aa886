// The lab's exercise page: the editor, hints and solution, and for the loop
// track the run itself. The student's JavaScript runs in a worker
// (lab_worker.js) with a time limit; the exercise's grader (its grade.js,
// served from its folder) builds the calls from the kernel's trace and
// holds each answer to the kernel's numbers, then to a float64 reference on
// hidden random shapes. The first difference is shown beside the kernel's
// own state at that step.
import { startRun } from './stream.js';
import { TraceModel } from './model.js';
import { Heatmap, fmt } from './views.js';
import { apiFetch, siteURL } from './site.js';

const page = JSON.parse(document.getElementById('fs-lab').textContent);
const $ = (id) => document.getElementById(id);
const saved = `flashstep.lab.${page.id}`;

// TIME_LIMIT is how long the student's code may run for one batch of
// calls; past it the worker is ended and the verdict says so.
export const TIME_LIMIT_MS = 3000;

const code = lazyEditor($('editor'), {
  doc: localStorage.getItem(saved) ?? page.starter,
  lang: page.lang,
  onChange: (text) => localStorage.setItem(saved, text),
});

// lazyEditor shows the code as plain text and builds the editor
// (CodeMirror: 250 KB of script, a task of 110-180 ms that would hold the
// page as it loads) when the student first reaches for it: a click or
// focus on the code, a key in it, or Run. It answers as the editor does;
// ready() resolves with the editor once it is built.
function lazyEditor(box, opts) {
  let text = opts.doc;
  let ed = null;
  let building = null;
  const plain = document.createElement('pre');
  plain.className = 'lab-editor-plain';
  plain.tabIndex = 0;
  plain.setAttribute('aria-label', `Your code (${opts.lang === 'cuda' ? 'CUDA C' : 'JavaScript'}): focus or click it to edit`);
  plain.dataset.testid = 'code-plain';
  plain.textContent = text;
  box.append(plain);
  const ready = () => {
    building ??= import('./lab_editor.js').then(({ editor }) => {
      const focused = document.activeElement === plain;
      plain.remove();
      ed = editor(box, { ...opts, doc: text });
      if (focused) ed.view.focus();
      return ed;
    });
    return building;
  };
  for (const ev of ['pointerdown', 'focus', 'keydown']) plain.addEventListener(ev, () => ready(), { once: true });
  return {
    ready,
    get: () => (ed ? ed.get() : text),
    set(t) {
      text = t;
      if (ed) ed.set(t);
      else plain.textContent = t;
    },
    syntaxError: () => ed?.syntaxError() ?? null,
    mark: (line, message) => ready().then((e) => e.mark(line, message)),
  };
}

$('lab-reset').addEventListener('click', () => {
  code.set(page.starter);
  localStorage.removeItem(saved);
});

// Hints come one at a time, in order; the last says there are no more.
let hintsShown = 0;
$('lab-hint').addEventListener('click', () => {
  const hint = document.querySelector(`#lab-hints [data-hint="${hintsShown}"]`);
  if (!hint) return;
  hint.hidden = false;
  hintsShown++;
  if (hintsShown >= page.hints) {
    $('lab-hint').disabled = true;
    $('lab-hint').textContent = 'No more hints';
  }
});

// The solution is fetched only when asked for: it is not in the page.
$('lab-solution').addEventListener('click', async () => {
  const res = await apiFetch(`/lab/${page.id}/solution`);
  if (!res.ok) return;
  $('lab-solution-code').textContent = await res.text();
  $('lab-solution-box').hidden = false;
  $('lab-solution').disabled = true;
});

const status = $('lab-status');
function say(verdict, text, data = {}) {
  // A verdict on the student's code (not "running", nor a run that could
  // not start) is the room's to count, where the page is in one.
  if (['pass', 'fail', 'timeout', 'error', 'compile', 'memcheck', 'racecheck'].includes(verdict) && data.counted !== false) {
    document.dispatchEvent(new CustomEvent('flashstep:lab-result', { detail: { verdict, ticket: data.ticket } }));
  }
  delete data.counted;
  delete data.ticket;
  status.textContent = text;
  status.dataset.verdict = verdict;
  for (const k of Object.keys(status.dataset)) if (k !== 'verdict') delete status.dataset[k];
  for (const [k, v] of Object.entries(data)) if (v !== undefined) status.dataset[k] = String(v);
}

// kernelRun streams the exercise's kernel run once and keeps it.
let kernel = null;
function kernelRun() {
  kernel ??= new Promise((resolve, reject) => {
    let model = null;
    startRun(page.run, {
      onHeader: (h) => { model = new TraceModel(h); },
      onRecord: (r) => model.add(r),
      onDone: (info) => (info.cancelled ? reject(new Error('the kernel run was cancelled')) : resolve(model)),
      onError: (msg) => reject(new Error(msg)),
    });
  });
  kernel.catch(() => { kernel = null; });
  return kernel;
}

// callsMatched says what the kernel's calls were, as a student counts
// them: a call that runs a q-tile's loop (its expectation holds that
// tile's steps) is a q-tile and its records; any other, a call.
function callsMatched(calls) {
  const steps = calls.reduce((n, c) => n + (c.expect?.steps?.length ?? 0), 0);
  if (steps > 0) return `on every one of its ${calls.length} ${calls.length === 1 ? 'q-tile' : 'q-tiles'} (${steps} ${steps === 1 ? 'record' : 'records'})`;
  return `at every one of its ${calls.length} ${calls.length === 1 ? 'call' : 'calls'}`;
}

// runStudent makes the calls in a fresh worker and resolves with what it
// answered, or { timeout: true } past the time limit.
export function runStudent(source, entry, calls, limit = TIME_LIMIT_MS) {
  return new Promise((resolve) => {
    const w = new Worker(siteURL('/static/js/lab_worker.js'));
    const timer = setTimeout(() => { w.terminate(); resolve({ timeout: true }); }, limit);
    w.onmessage = (ev) => { clearTimeout(timer); w.terminate(); resolve(ev.data); };
    w.onerror = (ev) => { clearTimeout(timer); w.terminate(); resolve({ error: { message: ev.message || 'the worker failed' } }); };
    w.postMessage({ source, entry, calls });
  });
}

function where(call, miss) {
  const at = call.at;
  if (at.i === undefined) {
    return `a hidden case (${Object.entries(at).map(([k, v]) => `${k} ${v}`).join(', ')})`;
  }
  const row = miss.row === undefined ? '' : `row ${at.rowStart + miss.row}, `;
  const tile = miss.final ? 'the end' : `kv-tile ${miss.j ?? at.j}`;
  return `${row}q-tile ${at.i}, ${tile}${at.bh ? `, batch-head ${at.bh}` : ''}`;
}

const cap = (s) => s[0].toUpperCase() + s.slice(1);

function describeMiss(call, miss) {
  if (miss.quantity === undefined) return `${cap(where(call, miss))}: ${miss.message}.`;
  const q = miss.quantity === 'O' ? `O[${miss.x}]` : miss.quantity;
  const theirs = call.at.i === undefined ? 'the float64 reference\'s' : 'the kernel\'s';
  return `${cap(where(call, miss))}: your ${q} is ${fmt(miss.yours)}, ${theirs} ${fmt(miss.kernelValue)}.`;
}

const views = { yours: null, kernel: null };
function showMiss(rowStart, miss, who = 'your') {
  const box = $('lab-diff');
  $('lab-diff-yours').textContent = who === 'your' ? 'Yours' : "The recorded solution's";
  if (!miss.state || !miss.kernel) { box.hidden = true; return; }
  box.hidden = false;
  views.yours ??= new Heatmap($('lab-o-yours'), { fit: true });
  views.kernel ??= new Heatmap($('lab-o-kernel'), { fit: true });
  const rows = miss.kernel.O.length, d = miss.kernel.O[0].length;
  const flat = (O) => Float32Array.from({ length: rows * d }, (_, e) => Number(O?.[Math.floor(e / d)]?.[e % d]));
  const max = Math.max(...flat(miss.kernel.O).map(Math.abs), 1e-30);
  const opts = { rows, cols: d, rowsValid: rows, colsValid: d, scale: 'diverging', max };
  views.yours.draw({ ...opts, values: flat(miss.state.O), name: `${who} O` });
  views.kernel.draw({ ...opts, values: flat(miss.kernel.O), name: 'kernel O' });
  const table = $('lab-rows');
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const t of ['row', `${who} m`, 'kernel m', `${who} l`, 'kernel l']) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = t;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (let r = 0; r < rows; r++) {
    const tr = body.insertRow();
    if (r === miss.row) tr.className = 'miss';
    for (const v of [rowStart + r, miss.state.m?.[r], miss.kernel.m[r], miss.state.l?.[r], miss.kernel.l[r]]) tr.insertCell().textContent = typeof v === 'number' ? fmt(v) : String(v);
  }
}

async function runLoop() {
  $('lab-run').disabled = true;
  $('lab-diff').hidden = true;
  try {
    say('running', 'Running the kernel, then your code…');
    const [model, grade] = await Promise.all([kernelRun(), import(siteURL(`/lab/${page.id}/grade.js`)), code.ready()]);
    const source = code.get();
    const syntax = code.syntaxError();
    if (syntax) {
      say('error', `Line ${syntax.line}: the code does not parse here. Fix it and run again.`, { line: syntax.line });
      code.mark(syntax.line, 'does not parse');
      return;
    }
    const phases = [
      { name: 'kernel', calls: grade.kernelCalls(model.h, model) },
    ];
    const seed = (Math.random() * 2 ** 32) >>> 0;
    phases.push({ name: 'hidden', calls: grade.randomCalls(seed), seed });
    for (const phase of phases) {
      const got = await runStudent(source, page.entry, phase.calls.map((c) => ({ args: c.args, record: Boolean(c.record) })));
      if (got.timeout) {
        say('timeout', `Your code ran for more than ${TIME_LIMIT_MS / 1000} s without returning and was stopped: is there a loop whose end is never reached?`);
        return;
      }
      if (got.error) {
        const call = phase.calls[got.at ?? 0];
        const at = got.at === undefined ? '' : ` (called for ${where(call, {})})`;
        say('error', `${got.error.line ? `Line ${got.error.line}: ` : ''}${got.error.message}${at}`, { line: got.error.line });
        if (got.error.line) code.mark(got.error.line, got.error.message);
        return;
      }
      for (let k = 0; k < phase.calls.length; k++) {
        const call = phase.calls[k];
        const miss = grade.check(call, got.results[k].value, got.results[k].records);
        if (!miss) continue;
        const hidden = phase.name === 'hidden';
        say('fail', (hidden ? `Every step of the kernel's run matched; then ` : '') + describeMiss(call, miss) + (hidden ? ` (hidden cases drawn from seed ${phase.seed})` : ''), {
          i: call.at.i, j: miss.final ? 'end' : (miss.j ?? call.at.j), row: miss.row === undefined ? undefined : call.at.rowStart + miss.row,
          quantity: miss.quantity, x: miss.x, step: miss.step, seed: hidden ? phase.seed : undefined,
        });
        if (!hidden) {
          showMiss(call.at.rowStart, miss);
          if (miss.step !== undefined) $('lab-run-link').href = siteURL(`/step?${page.run}&step=${miss.step + 1}`);
        }
        return;
      }
    }
    say('pass', `Passed: your code matches the kernel ${callsMatched(phases[0].calls)}, and the float64 reference on ${phases[1].calls.length} hidden random cases (seed ${seed}).`, { seed });
    localStorage.setItem(`${saved}.passed`, '1');
  } catch (e) {
    say('error', `The run could not start: ${e.message}`, { counted: false });
  } finally {
    $('lab-run').disabled = false;
  }
}

// kernelState is the reference kernel's state after step (bh, i, j) of its
// trace, as the views draw it: rows of m, l and O.
function kernelState(model, bh, i, j) {
  const r = model.steps.find((x) => x.kind === 'flash_step' && x.bh === bh && x.i === i && x.j === j);
  if (!r) return null;
  const d = model.h.D, rows = r.rowsValid;
  return {
    m: Array.from(r.m_new.subarray(0, rows)), l: Array.from(r.l.subarray(0, rows)),
    O: Array.from({ length: rows }, (_, x) => Array.from(r.o.subarray(x * d, (x + 1) * d))),
    step: model.steps.indexOf(r),
  };
}

// studentState is the same from a verdict's records.
function studentState(steps, kernel, bh, i, j) {
  const rows = kernel.m.length, d = kernel.O[0].length;
  const st = { m: new Array(rows).fill(NaN), l: new Array(rows).fill(NaN), O: Array.from({ length: rows }, () => new Array(d).fill(NaN)) };
  for (const s of steps) {
    if (s.BH === bh && s.I === i && s.J === j && s.R < rows) {
      st.m[s.R] = f32(s.M);
      st.l[s.R] = f32(s.L);
      st.O[s.R] = floats(s.O);
    }
  }
  return st;
}

// The worker sends a float as its bits, and arrays of them as base64.
const bits = new DataView(new ArrayBuffer(4));
const f32 = (u) => { bits.setUint32(0, u); return bits.getFloat32(0); };
function floats(b64) {
  const raw = Uint8Array.from(atob(b64 || ''), (c) => c.charCodeAt(0));
  return Array.from(new Float32Array(raw.buffer, 0, raw.length / 4));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// showOutput shows what the kernel's threads printed (printf), as the
// server kept it: its first 8 KiB (lab.MaxOutputBytes), and how much
// more there was.
function showOutput(v) {
  if (!v.output) return;
  $('lab-output').hidden = false;
  $('lab-output-title').textContent = v.output_cut
    ? `What your kernel printed (its first 8 KiB; ${v.output_cut} more bytes were cut)`
    : 'What your kernel printed';
  $('lab-output-text').textContent = v.output;
}

async function runKernel() {
  $('lab-run').disabled = true;
  $('lab-diff').hidden = true;
  $('lab-log').hidden = true;
  $('lab-output').hidden = true;
  $('lab-placed').hidden = true;
  try {
    say('running', 'Sending your kernel to the GPU…');
    const params = new URLSearchParams();
    if ($('lab-check')?.value) params.set('check', $('lab-check').value);
    // In a room, under the room's path: the request carries the student's
    // cookie, so the kernel is theirs and its verdict counts for them alone.
    const submissions = page.room ? `/r/${page.room}/lab/${page.id}/submissions` : `/api/lab/${page.id}/submissions`;
    const res = await apiFetch(`${submissions}${params.size ? `?${params}` : ''}`, { method: 'POST', body: code.get(), headers: { 'Content-Type': 'text/plain' } });
    const body = await res.json();
    if (!res.ok) {
      say(res.status === 503 ? 'busy' : 'error', body.fields?.[0]?.message || body.error || `HTTP ${res.status}`, { counted: false });
      return;
    }
    const ticket = body.id;
    let st;
    for (;;) {
      const r = await apiFetch(`/api/lab/submissions/${body.id}`);
      st = await r.json();
      if (!r.ok) { say('error', st.error || `HTTP ${r.status}`, { counted: false }); return; }
      if (st.state === 'done' || st.state === 'cancelled') break;
      say('running', st.state === 'queued' ? `Waiting for the GPU: ${st.ahead} ${st.ahead === 1 ? 'kernel' : 'kernels'} ahead of yours.` : 'Compiling your kernel and running it on the GPU…');
      await sleep(400);
    }
    const v = st.verdict;
    if (!v) { say('error', 'The submission was cancelled.', { counted: false }); return; }
    showOutput(v);
    if (v.verdict === 'compile') {
      say('error', v.line ? `Line ${v.line}: ${firstError(v.log)}` : v.message, { line: v.line || undefined, ticket });
      if (v.line) code.mark(v.line, firstError(v.log));
      $('lab-log-title').textContent = "The compiler's messages";
      $('lab-log').hidden = !v.log;
      $('lab-log-text').textContent = v.log || '';
      return;
    }
    if (v.verdict === 'memcheck' || v.verdict === 'racecheck') {
      say('fail', v.message, { check: v.verdict, ticket });
      $('lab-log-title').textContent = "compute-sanitizer's report";
      $('lab-log').hidden = false;
      $('lab-log-text').textContent = v.log;
      return;
    }
    if (v.verdict !== 'fail') {
      say(v.verdict, v.message, { seed: v.seed, ticket });
      if (v.placed) showPlaced(v.placed);
      // A passing kernel's records, to step beside the kernel's.
      if (v.steps?.length) stepRecords(await kernelRun(), v.steps, 'your');
      return;
    }
    const m = v.miss;
    say('fail', v.message, { i: m.I, j: m.J < 0 ? 'end' : m.J, row: m.Row, quantity: m.Quantity || undefined, x: m.X >= 0 ? m.X : undefined, run: m.Run, ticket });
    if (m.Run === 0 && v.steps?.length) {
      // Every record of the student's, opened at the first difference.
      const model = await kernelRun();
      stepRecords(model, v.steps, 'your', `${m.BH},${m.I},${m.J}`);
      if (m.J >= 0 && $('lab-records-step').value === `${m.BH},${m.I},${m.J}`) showRecords({ row: m.Row - m.I * model.h.Br });
    }
  } catch (e) {
    say('error', `The submission failed: ${e.message}`, { counted: false });
  } finally {
    $('lab-run').disabled = false;
  }
}

// showPlaced sets a passing kernel, timed at the ladder's size, among the
// rungs' recorded figures.
function showPlaced(p, who = 'your kernel') {
  $('lab-placed').hidden = false;
  if (p.note) {
    $('lab-placed-caption').textContent = `On the ladder: ${p.note}.`;
    $('lab-placed-table').replaceChildren();
    return;
  }
  $('lab-placed-caption').textContent = `On the ladder (${p.shape}): ${who} ran in ${p.ms.toFixed(2)} ms, ${p.tflops.toFixed(2)} TFLOP/s, beside each rung's figure recorded on an H100.`;
  const table = $('lab-placed-table');
  table.replaceChildren();
  for (const r of p.rungs) {
    const tr = table.insertRow();
    if (r.yours) tr.className = 'yours';
    tr.insertCell().textContent = r.yours ? who : `rung ${r.number}: ${r.name}`;
    tr.insertCell().textContent = `${r.tflops.toFixed(r.tflops < 10 ? 2 : 0)} TFLOP/s`;
  }
  // Where the rungs' figures come from, and why a float32 kernel may
  // outrun the float32 rungs.
  const about = [p.source ? `Rungs: ${p.source}.` : '', p.float_rungs || ''].filter(Boolean).join(' ');
  if (about) {
    const tr = table.insertRow();
    const td = tr.insertCell();
    td.colSpan = 2;
    td.className = 'note';
    td.textContent = about;
  }
}

// firstError is the compiler's first error message, without its file and line.
function firstError(log) {
  const m = /student\.cu\(\d+\): (?:catastrophic )?error: ([^\n]*)/.exec(log || '');
  return m ? m[1] : 'the compiler refused it';
}

// stepRecords steps a kernel's records (a student's verdict, or the
// solution's recorded one), each kv-tile of each q-tile beside the
// reference kernel's state after the same step, starting at key
// ("bh,i,j") or the first.
const records = { steps: [], who: 'your', keys: [], model: null };
function stepRecords(model, steps, who, key) {
  Object.assign(records, { steps, who, model, keys: [...new Set(steps.map((s) => `${s.BH},${s.I},${s.J}`))] });
  if (!records.keys.length) return;
  $('lab-records').hidden = false;
  $('lab-records-who').textContent = who === 'your' ? 'Your records' : "The solution's records";
  const pick = $('lab-records-step');
  pick.replaceChildren(...records.keys.map((k) => {
    const [bh, i, j] = k.split(',').map(Number);
    return new Option(`q-tile ${i}, kv-tile ${j}${bh ? `, batch-head ${bh}` : ''}`, k);
  }));
  pick.selectedIndex = Math.max(records.keys.indexOf(key), 0);
  showRecords();
}
function showRecords(miss) {
  const [bh, i, j] = $('lab-records-step').value.split(',').map(Number);
  const model = records.model;
  const kernel = kernelState(model, bh, i, j);
  if (!kernel) return;
  showMiss(i * model.h.Br, { row: miss?.row, state: studentState(records.steps, kernel, bh, i, j), kernel }, records.who);
  $('lab-run-link').href = siteURL(`/step?${page.run}&step=${kernel.step + 1}`);
}
function moveRecords(by) {
  const pick = $('lab-records-step');
  pick.selectedIndex = Math.min(Math.max(pick.selectedIndex + by, 0), records.keys.length - 1);
  showRecords();
}
$('lab-records-step')?.addEventListener('change', () => showRecords());
$('lab-records-prev')?.addEventListener('click', () => moveRecords(-1));
$('lab-records-next')?.addEventListener('click', () => moveRecords(1));

// showRecorded, where the kernel track is off: the solution's verdict as
// the server answered it on a GPU, its records stepped beside the
// reference kernel's, as a student's would be.
async function showRecorded() {
  const res = await apiFetch(`/lab/${page.id}/recorded.json`);
  if (!res.ok) return;
  const rec = await res.json();
  const v = rec.verdict;
  const model = await kernelRun();
  $('lab-recorded').hidden = false;
  $('lab-recorded-caption').textContent = `The solution, compiled and run on an ${rec.gpu} on ${rec.date} by this server's kernel track, ` +
    `got the verdict "${v.verdict}": every record it made matched the reference kernel's, and its output matched the float64 reference on hidden runs. ` +
    `It took ${v.ms.toFixed(3)} ms on the exercise's run, and ${v.took.toFixed(2)} s from submission to verdict. Step its records below, beside the reference kernel's.`;
  if (v.placed) showPlaced(v.placed, 'the solution');
  stepRecords(model, v.steps, 'recorded');
}

if (page.track === 'loop') {
  $('lab-run').addEventListener('click', runLoop);
} else if (page.kernel_track) {
  $('lab-run').addEventListener('click', runKernel);
} else {
  $('lab-run').disabled = true;
  showRecorded().catch((e) => say('error', `The recorded run could not be shown: ${e.message}`, { counted: false }));
}

// In a room, the presenter turns the kernel track on or off for the class
// (classroom.js passes it on): a kernel page rendered the other way
// reloads, its code kept in this browser.
document.addEventListener('flashstep:kernels', (ev) => {
  if (page.track === 'kernel' && page.server_kernels && ev.detail.off === page.kernel_track) location.reload();
});
