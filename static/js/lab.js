// The lab's exercise page: the editor, hints and solution, and for the loop
// track the run itself. The student's JavaScript runs in a worker
// (lab_worker.js) with a time limit; the exercise's grader (its grade.js,
// served from its folder) builds the calls from the kernel's trace and
// holds each answer to the kernel's numbers, then to a float64 reference on
// hidden random shapes. The first difference is shown beside the kernel's
// own state at that step.
import { fmt } from './format.js';
import { apiFetch, siteURL } from './site.js';
import { page, $, saved, say, kernelRun } from './lab_page.js';
import { showMiss } from './lab_records.js';
import { runKernel, showRecorded } from './lab_kernel.js';

// TIME_LIMIT_MS is how long the student's code may run for one batch of
// calls, as the server says (-lab-loop-time); past it the worker is ended
// and the verdict says so.
export const TIME_LIMIT_MS = page.loop_time_ms || 3000;

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
const fmtSeconds = (ms) => `${+(ms / 1000).toFixed(1)} s`;

function describeMiss(call, miss) {
  if (miss.quantity === undefined) return `${cap(where(call, miss))}: ${miss.message}.`;
  const q = miss.quantity === 'O' ? `O[${miss.x}]` : miss.quantity;
  const theirs = call.at.i === undefined ? 'the float64 reference\'s' : 'the kernel\'s';
  return `${cap(where(call, miss))}: your ${q} is ${fmt(miss.yours)}, ${theirs} ${fmt(miss.kernelValue)}.`;
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
        say('timeout', `Your code ran for more than ${fmtSeconds(TIME_LIMIT_MS)} without returning and was stopped: is there a loop whose end is never reached?`);
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

if (page.track === 'loop') {
  $('lab-run').addEventListener('click', runLoop);
} else if (page.kernel_track) {
  $('lab-run').addEventListener('click', () => runKernel(code));
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
