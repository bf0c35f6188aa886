// The stepper's run form: the form as a run's query, checked by the server
// as it is edited (each field's problem beside it, the estimate, where the
// run would run), the compiled GPU tiles filling Br, Bc and d at once, the
// query rows' and K/V heads' defaults shown as N's and heads' numbers, and
// taking a run off the screen.
import { apiFetch, onSite } from './site.js';
import { $, setStatus, state } from './stepper_page.js';

export const form = $('run-form');

// formQuery is the form as a run's URL query. A blank size field is sent
// blank, so the server says it is required instead of quietly using the
// default; a blank traced range means all of it, and a blank nq (query
// rows) or kv_heads (heads of K and V) N or heads: those are left out, as
// the server leaves them out of a run's URL at their defaults.
function formQuery() {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(form)) {
    if (typeof v !== 'string') continue;
    const t = v.trim();
    const el = form.elements[k];
    const required = el?.dataset.min !== undefined || el?.dataset.required !== undefined;
    if (required || (t !== '' && t !== 'all')) q.set(k, t);
  }
  if (!q.has('causal')) q.set('causal', '0');
  return q.toString();
}

export function showFieldErrors(fields) {
  const byField = {};
  for (const f of fields || []) byField[f.field] = f.message;
  for (const el of form.querySelectorAll('.field-error')) {
    const msg = byField[el.dataset.field] || '';
    el.textContent = msg;
    el.closest('.field, .check')?.classList.toggle('invalid', msg !== '');
  }
  const selection = form.querySelector('details.selection');
  if (selection && (byField.trace_bh || byField.trace_q)) selection.open = true;
}

let checkSeq = 0;
async function checkForm() {
  const seq = ++checkSeq;
  const q = formQuery();
  const res = await apiFetch(`/api/config?${q}`);
  const body = await res.json();
  if (seq !== checkSeq) return null; // a newer edit has been checked since
  if (!res.ok) {
    showFieldErrors(body.fields);
    $('estimate').textContent = '–';
    $('run').disabled = true;
    // What is on screen no longer matches the form: say so rather than
    // leave a finished run looking current.
    if (state.model) $('stepper').classList.add('stale');
    setStatus(`Fix the highlighted fields to run${state.model ? '; the views show the previous run' : ''}: ${(body.fields || []).map((f) => f.message).join('; ') || body.error}`, true);
    return null;
  }
  showFieldErrors([]);
  $('estimate').textContent = body.estimate;
  $('runs-on').textContent = body.runs_on;
  // The static site has no download link: its traces are recordings'
  // own files, or made in this browser.
  if (!onSite) $('download').href = `/api/trace?${body.query}`;
  $('run').disabled = false;
  if (body.query === state.query && state.model) {
    $('stepper').classList.remove('stale');
    if (state.finished) setStatus(state.finished);
  } else if (state.model) {
    $('stepper').classList.add('stale');
    setStatus('The form has changed: press Run to run it; the views show the previous run.');
  }
  return body;
}

// The compiled GPU tiles fill Br, Bc and d at once.
$('gpu-tiles').addEventListener('change', (ev) => {
  const v = ev.target.value;
  if (!v) return;
  const [variant, br, bc, d] = v.split(',');
  $('f-br').value = br;
  $('f-bc').value = bc;
  $('f-d').value = d;
  // Rungs compiled at the same tiles share an option whose value lists
  // them all (the float32 ones): keep the one chosen, or take the last.
  const shared = variant.split('|');
  $('f-variant').value = shared.includes($('f-variant').value) ? $('f-variant').value : shared[shared.length - 1];
  ev.target.value = '';
  form.dispatchEvent(new Event('input'));
});

// showDefaults writes in the blank query rows and K/V heads what a blank
// means: as many query rows as N, as many K/V heads as heads.
function showDefaults() {
  const { nq, kv_heads: kv, n, heads } = form.elements;
  if (nq && n) nq.placeholder = /^\d+$/.test(n.value.trim()) ? n.value.trim() : 'N';
  if (kv && heads) kv.placeholder = /^\d+$/.test(heads.value.trim()) ? heads.value.trim() : 'heads';
}
showDefaults();

let debounce = null;
form.addEventListener('input', (ev) => {
  showDefaults();
  // The file field is in the form, but a file is no edit of the run the
  // form names: checking the form then would put the previous run's
  // status back over the file's.
  if (ev.target.id === 'upload') return;
  clearTimeout(debounce);
  debounce = setTimeout(checkForm, 200);
});

// checkFormNow checks the form at once, for a run about to start.
export function checkFormNow() {
  clearTimeout(debounce);
  return checkForm();
}

// clearRun takes the previous run off the screen.
export function clearRun() {
  state.model = null;
  state.k = -1;
  state.query = '';
  state.finished = '';
  $('stepper').classList.remove('stale');
  $('stepper').classList.add('empty');
  $('step-label').textContent = '–';
  $('step-title').textContent = '';
  $('step-explain').textContent = '';
  $('source').textContent = '';
}
