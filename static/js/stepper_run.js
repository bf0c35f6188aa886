// A run into the stepper: started from the form, from a trace file, from
// the page's own URL or by another module of the page (a room), streamed
// into the trace model, the status line following it.
import { startRun, readFile } from './stream.js';
import { TraceModel } from './model.js';
import { $, page, pagePath, setStatus, state } from './stepper_page.js';
import { checkFormNow, clearRun, showFieldErrors } from './stepper_form.js';
import { loadKernelSource, showKernelFigures, showSource } from './source_view.js';
import { setupRoles, updateLabel } from './stepper_panels.js';
import { go, pause, setupSelectors } from './stepper_playback.js';

// stopRun lets the current run go: nothing it still sends reaches the page,
// which has moved on to another run or a file.
function stopRun() {
  pause();
  state.run?.detach();
  state.run = null;
}

// handlersFor is what a run's stream, or a file, tells the page: its header
// sets the page up for the trace, each record grows the model.
function handlersFor() {
  let lastStatus = 0;
  return {
    onHeader(h) {
      // A timing trace has no arrays: its views are the tile grid and the timeline.
      $('stepper').classList.toggle('timing-trace', h.timing);
      state.model = new TraceModel(h);
      setupRoles(h);
      setupSelectors(h);
      showSource(h);
      showKernelFigures(h);
      loadKernelSource(h.variant);
    },
    onRecord(r) {
      const m = state.model;
      m.add(r);
      if (r.kind === 'inputs') return;
      $('scrub').max = String(m.length);
      if (state.k < 0 || m.length - 1 === state.want) go(Math.min(state.want, m.length - 1));
      const now = performance.now();
      if (now - lastStatus > 100) {
        lastStatus = now;
        setStatus(`Streaming over ${state.transport}: ${m.length} steps received…`);
        updateLabel();
      }
    },
  };
}

export function begin(query, wantStep) {
  stopRun();
  $('stepper').classList.remove('stale', 'empty');
  state.finished = '';
  state.query = query;
  state.model = null;
  state.loaded = false;
  state.k = -1;
  state.want = wantStep;
  state.t0 = performance.now();
  state.firstDrawn = false;
  $('run-status').removeAttribute('data-first-step-ms');
  setStatus('Starting the run…');
  const h = handlersFor();
  state.run = startRun(query, {
    ...h,
    onTransport(name) { state.transport = name; },
    onQueued(ahead) {
      setStatus(ahead < 0 ? 'Computing: the server has begun this run.' : ahead === 0
        ? 'Waiting: the server is computing other runs, and this one is next.'
        : `Waiting: ${ahead} run${ahead === 1 ? '' : 's'} ahead of this one in the server's queue.`);
    },
    onDone(info) {
      if (info.cancelled) setStatus(`Run cancelled after ${state.model?.length ?? 0} steps.`);
      else {
        const h = state.model.h;
        // A recording was computed when it was recorded, not now.
        const how = h.source === 'recording'
          ? `, replayed from a recording made ${new Date(h.recordedUnix * 1000).toISOString().slice(0, 10)}`
          : info.ms != null ? `, computed in ${info.ms < 1 ? 'under 1' : info.ms} ms` : '';
        state.finished = `Trace complete: ${state.model.length} steps over ${state.transport}${how}.`;
        setStatus(state.finished);
      }
      finishedLoading();
    },
    onError(msg, fields) {
      setStatus(msg, true);
      if (fields) showFieldErrors(fields);
    },
  });
}

function finishedLoading() {
  const m = state.model;
  if (!m) return;
  state.loaded = true;
  $('scrub').max = String(Math.max(1, m.length));
  if (state.urlNote) {
    state.finished += state.urlNote;
    state.urlNote = '';
    setStatus(state.finished);
  }
  if (state.want >= m.length && m.length > 0) {
    // A link past the end: show the last step and say why.
    go(m.length - 1);
    state.finished += ` This run has ${m.length} steps: step ${state.want + 1} does not exist, so the last is shown.`;
    setStatus(state.finished);
    return;
  }
  go(Math.min(Math.max(state.k, 0), m.length - 1));
}

// Run: the form's run, once the server has checked it.
$('run-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const ok = await checkFormNow();
  if (!ok) {
    // Nothing runs, and nothing of the previous run stays on screen as if
    // it were the answer to this form.
    stopRun();
    clearRun();
    $('run-settings').open = true;
    return;
  }
  history.pushState(null, '', `${pagePath()}?${ok.query}`);
  $('run-summary').textContent = ok.summary;
  $('run-settings').open = false;
  begin(ok.query, 0);
});

window.addEventListener('popstate', () => location.reload());

// A trace file chosen is replayed in place of the run.
$('upload').addEventListener('change', async (ev) => {
  const file = ev.target.files[0];
  if (!file) return;
  stopRun();
  // The views now show the file, not the form's run: a later check of the
  // form must not take the file for the run it names, nor put that run's
  // "Trace complete" back.
  state.query = '';
  state.finished = '';
  $('stepper').classList.remove('stale', 'empty');
  state.model = null;
  state.loaded = false;
  state.k = -1;
  state.want = 0;
  state.transport = `file ${file.name}`;
  try {
    const n = await readFile(file, handlersFor(), page.max_file_bytes);
    setStatus(`Replaying ${file.name}: ${n} records.`);
    finishedLoading();
  } catch (e) {
    // What the file held before it failed is no run to step: the error
    // stays, over empty views, until the next run or file.
    clearRun();
    setStatus(`Could not read ${file.name}: ${e.message}`, true);
  }
});

// Another module of the page (a room) asks for a run, at a step (from 1).
document.addEventListener('flashstep:run', (ev) => {
  const { query, step = 1 } = ev.detail;
  if (query === state.query && state.model) return go(step - 1);
  history.replaceState(null, '', `${pagePath()}?${query}`);
  begin(query, step - 1);
});
