// A lesson's checkpoints: each answer graded by the server against the
// trace, the verdict and its explanation shown, the progress kept in this
// browser, what waited on an answer released, and the closing check's list
// of lessons to revisit.
import * as progress from './lesson_progress.js';
import { apiFetch } from './site.js';
import { showStep } from './lesson_widgets.js';

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// data is the lesson's (its slug and checkpoints), set by initCheckpoints.
let data = {};

function answerOf(form, format) {
  switch (format) {
    case 'number':
      return form.elements.answer.value;
    case 'choice':
      return form.elements.answer.value; // radios or a select alike
    case 'tiles': {
      const picked = $$('input[name="tile"]:checked', form).map((i) => i.value);
      return picked.length ? picked.join(';') : 'none';
    }
  }
  return '';
}

function showVerdict(cp, v) {
  const verdict = $('.verdict', cp);
  const text = {
    correct: `Correct${v.answer ? `: ${v.answer}` : ''}.`,
    revealed: `The kernel's answer: ${v.answer}.`,
    wrong: v.hint,
    invalid: v.hint,
  }[v.status] || v.hint || 'Something went wrong.';
  verdict.textContent = text;
  verdict.className = `verdict ${v.status}`;
  const settled = v.status === 'correct' || v.status === 'revealed';
  cp.classList.toggle('settled', settled);
  if (settled) settle(cp.dataset.checkpoint);
  const exp = $('.explanation', cp);
  if (v.explanation) {
    exp.replaceChildren();
    const p = document.createElement('p');
    p.textContent = v.explanation;
    exp.append(p);
    if (v.source) {
      const src = document.createElement('p');
      src.className = 'note';
      src.textContent = `Numbers from: ${v.source}.`;
      exp.append(src);
    }
    const fig = v.widget && document.getElementById(v.widget);
    if (fig && v.step > 0 && $('iframe', fig)) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'button';
      b.textContent = `Show step ${v.step} in the widget`;
      b.addEventListener('click', () => {
        history.replaceState(null, '', `#${fig.id}:step=${v.step}`);
        showStep(fig, v.step);
      });
      exp.append(b);
    }
    exp.hidden = false;
  } else {
    exp.hidden = true;
  }
}

function settledIDs() {
  return new Set((document.body.dataset.settled || '').split(',').filter(Boolean));
}

// settle shows what waited on a checkpoint's answer: the text that
// discusses it (::: reveal after=ID) and, through an event, the widgets
// that hold back a conclusion until it is answered (the loop's parting).
function settle(id) {
  for (const el of $$(`.reveal[data-after="${id}"]`)) el.hidden = false;
  // A widget whose checkpoints are all answered shows what it held back.
  for (const fig of $$('figure.widget[data-asked-by]')) {
    const asked = fig.dataset.askedBy.split(',').filter(Boolean);
    if (!asked.includes(id) || !asked.every((a) => a === id || settledIDs().has(a))) continue;
    const frame = $('iframe', fig);
    if (!frame) continue;
    if (fig.dataset.current !== undefined) frame.contentWindow.postMessage({ type: 'flashstep-release' }, location.origin);
    // The frame's page to be (data-src: a frame is given its src only when
    // the lesson wants it), the page it has (src), and the base a step is
    // shown from all lose the hold. A running page was told; a frame not
    // yet running loads again without it.
    for (const attr of ['src', 'data-src', 'data-base-src']) {
      if (!frame.hasAttribute(attr) || (attr === 'src' && fig.dataset.current !== undefined)) continue;
      const url = new URL(frame.getAttribute(attr), location.origin);
      if (!url.searchParams.has('hold')) continue;
      url.searchParams.delete('hold');
      frame.setAttribute(attr, url.pathname + url.search);
    }
  }
  const done = new Set((document.body.dataset.settled || '').split(',').filter(Boolean));
  done.add(id);
  document.body.dataset.settled = [...done].join(',');
  document.dispatchEvent(new CustomEvent('flashstep-settled', { detail: { checkpoint: id } }));
}

async function submitCheckpoint(cp, reveal) {
  const form = $('form', cp);
  const id = cp.dataset.checkpoint;
  const verdict = $('.verdict', cp);
  verdict.textContent = reveal ? 'Asking the trace…' : 'Checking against the trace…';
  verdict.className = 'verdict pending';
  let res;
  let body;
  try {
    res = await apiFetch(`/api/checkpoints/${encodeURIComponent(data.slug)}/${encodeURIComponent(id)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ answer: reveal ? '' : answerOf(form, cp.dataset.format), reveal }),
    });
    body = await res.json();
  } catch (err) {
    verdict.textContent = `The server could not be reached (${err.message}); try again.`;
    verdict.className = 'verdict invalid';
    return;
  }
  if (!res.ok) {
    verdict.textContent = body.error || `The server answered ${res.status}.`;
    verdict.className = 'verdict invalid';
    return;
  }
  if (body.status === 'wrong' && !reveal) cp.dataset.missed = '1';
  showVerdict(cp, body);
  if (body.status === 'correct' || body.status === 'revealed') {
    progress.set(data.slug, id, {
      status: body.status, answer: body.answer, explanation: body.explanation,
      step: body.step, widget: body.widget, source: body.source, missed: cp.dataset.missed === '1',
    });
    updateLessonProgress();
  }
  updateRevisit();
}

// updateRevisit fills the closing check's box: every question missed
// (answered wrong before right, or given up) names its lesson.
export function updateRevisit() {
  const box = $('#revisit');
  if (!box) return;
  const asked = $$('section.checkpoint[data-revisit]').filter((cp) => cp.dataset.revisit);
  const why = new Map();
  let settled = 0;
  asked.forEach((cp, k) => {
    const saved = progress.get(data.slug, cp.dataset.checkpoint);
    if (!saved) return;
    settled++;
    if (saved.status === 'revealed' || saved.missed) {
      why.set(cp.dataset.revisit, [...(why.get(cp.dataset.revisit) || []), k + 1]);
    }
  });
  for (const li of $$('li[data-lesson]', box)) {
    const missed = why.get(li.dataset.lesson);
    li.hidden = !missed;
    $('.revisit-why', li).textContent = missed
      ? ` (question${missed.length > 1 ? 's' : ''} ${missed.join(', ')})`
      : '';
  }
  $('.revisit-status', box).textContent = settled === 0
    ? 'Answer the questions above: this box then names the lessons to read again.'
    : why.size === 0
      ? `${settled} of ${asked.length} answered, all right the first time${settled === asked.length ? ': nothing to revisit.' : '.'}`
      : `${settled} of ${asked.length} answered. Read again:`;
}

export function initCheckpoints(lesson) {
  data = lesson;
  for (const cp of $$('section.checkpoint')) {
    const form = $('form', cp);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      submitCheckpoint(cp, false);
    });
    $('[data-action="reveal"]', cp).addEventListener('click', () => submitCheckpoint(cp, true));
    const saved = progress.get(data.slug, cp.dataset.checkpoint);
    if (saved) showVerdict(cp, { ...saved, hint: '' });
    // The page serves them disabled: before this, a click would submit
    // the form natively and reload the page.
    for (const b of $$('button[data-action]', form)) b.disabled = false;
  }
}

export function updateLessonProgress() {
  if (!data.slug) return;
  const state = progress.lessonState(data.slug, data.checkpoints || []);
  document.body.dataset.lessonState = state;
  progress.markCourseMap();
}
