// The lab's kernel track: a student's CUDA kernel sent to the server's GPU,
// its verdict (the compiler's errors, the sanitizers' reports, the first
// number that differs), what it printed, and where a passing kernel lands
// on the ladder; where the track is off, the solution's verdict as it was
// recorded on a GPU.
import { apiFetch } from './site.js';
import { page, $, say, kernelRun } from './lab_page.js';
import { stepRecords, showRecords } from './lab_records.js';

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

// runKernel sends the code in the editor (code, lab.js's) to the GPU and
// shows its verdict.
export async function runKernel(code) {
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

// showRecorded, where the kernel track is off: the solution's verdict as
// the server answered it on a GPU, its records stepped beside the
// reference kernel's, as a student's would be.
export async function showRecorded() {
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
