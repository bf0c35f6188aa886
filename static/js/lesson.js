// A lesson page and the course map: math typeset with KaTeX, embedded
// steppers driven by postMessage, checkpoints graded by the server, progress
// kept in this browser, deep links to a widget at a step, keyboard
// navigation between lessons, and a projector mode.
import * as progress from './lesson_progress.js';
import { initMemoryCalculators } from './lesson_memory.js';
import { initPlaygrounds } from './playground.js';
import { initLoopWidgets } from './lesson_loop.js';
import { installRunHub } from './stream.js';
import { apiFetch, siteURL } from './site.js';

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const data = JSON.parse($('#lesson-data')?.textContent || '{}');

// ---- math ----

// typeset renders the page's formulas a slice at a time, those in view
// first, yielding the main thread between slices: a long lesson's formulas
// at once held it for a tenth of a second or more. It resolves when every
// formula is typeset.
function typeset() {
  const maths = $$('.math');
  for (const el of maths) el.dataset.tex = el.textContent;
  const done = new Promise((resolve) => {
    if (!globalThis.katex) return resolve();
    // Whether a formula is in view, from its block of the lesson: the text
    // below the fold is not laid out yet (content-visibility: auto in
    // lesson.css), and a formula's own box there would lay it out.
    const inView = (el) => {
      const r = (el.closest('.lesson > *') || el).getBoundingClientRect();
      return r.bottom >= 0 && r.top <= innerHeight;
    };
    const first = maths.filter(inView);
    const queue = [...first, ...maths.filter((el) => !first.includes(el))];
    const slice = () => {
      const until = performance.now() + 25;
      while (queue.length && performance.now() < until) {
        const el = queue.shift();
        globalThis.katex.render(el.dataset.tex, el, { displayMode: el.classList.contains('display'), throwOnError: false });
      }
      if (queue.length) setTimeout(slice, 0);
      else resolve();
    };
    slice();
  });
  // A server built without its browser libraries (no `make assets`) sends
  // no KaTeX: say why the formulas read as LaTeX rather than leave them so.
  if (!globalThis.katex && maths.length) {
    const note = document.createElement('p');
    note.className = 'note no-katex';
    note.setAttribute('role', 'status');
    note.textContent = 'The formulas on this page are shown as raw LaTeX: this server was built without its browser libraries (run `make assets`, then build and start it again).';
    maths[0].closest('article, main, body').prepend(note);
  }
  return done;
}

// ---- embedded steppers ----

// Each framed widget hears from its page which step it shows.
const frames = new Map(); // contentWindow -> widget element

// A framed widget builds itself (streams its run, decodes it, draws it)
// only when the lesson wants it (embed.js's whenWanted): when it comes
// within WANT_MARGIN of the viewport, when its frame is asked to load at
// once (loading="eager"), or when the lesson moves it to a step. A lesson
// with a dozen widgets otherwise built them all as it loaded, and held the
// main thread, which its frames share, for a second.
const WANT_MARGIN = '600px';

function want(fig) {
  if (fig.dataset.wanted === '1') return;
  fig.dataset.wanted = '1';
  // A frame whose page has not loaded yet reads data-wanted when it does.
  $('iframe', fig)?.contentWindow?.postMessage({ type: 'flashstep-build' }, location.origin);
}

function widgetFrames() {
  const near = typeof IntersectionObserver === 'undefined' ? null : new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      near.unobserve(e.target);
      want(e.target);
    }
  }, { rootMargin: `${WANT_MARGIN} 0px` });
  const eager = new MutationObserver((records) => {
    for (const r of records) if (r.target.loading === 'eager') want(r.target.closest('figure.widget'));
  });
  for (const fig of $$('figure.widget')) {
    const frame = $('iframe', fig);
    if (!frame) continue;
    frames.set(frame.contentWindow, fig);
    if (!near || frame.loading === 'eager') want(fig);
    else near.observe(fig);
    eager.observe(frame, { attributes: true, attributeFilter: ['loading'] });
  }
}

window.addEventListener('message', (ev) => {
  if (ev.origin !== location.origin || !ev.data || typeof ev.data !== 'object') return;
  const fig = frames.get(ev.source);
  if (!fig) return;
  if (ev.data.type === 'flashstep-step' && Number.isInteger(ev.data.step)) {
    // Steps count from 1, in the stepper's URLs, messages and pages alike.
    const { step, total } = ev.data;
    fig.dataset.current = String(step);
    $('.widget-step', fig).textContent = Number.isInteger(total) ? `step ${step} of ${total}` : `step ${step}`;
    $('.widget-link', fig).href = `#${fig.id}:step=${step}`;
    // Present opens the room where the widget stands.
    const present = $('.widget-present input[name="step"]', fig);
    if (present) present.value = String(step);
  } else if (ev.data.type === 'flashstep-size' && Number.isFinite(ev.data.height)) {
    $('iframe', fig).style.height = `${Math.min(Math.max(ev.data.height, 200), 2400)}px`;
  }
});

// showStep moves a framed widget to step k (from 1) and brings it into view.
function showStep(fig, k) {
  const frame = $('iframe', fig);
  if (!frame) return;
  want(fig);
  setProjectorWidget(fig);
  fig.scrollIntoView({ behavior: 'smooth', block: 'start' });
  if (fig.dataset.current !== undefined) {
    // The page inside is running: ask it to move.
    frame.contentWindow.postMessage({ type: 'flashstep-go', step: k }, location.origin);
  } else {
    const url = new URL(frame.dataset.baseSrc, location.origin);
    url.searchParams.set('step', String(k));
    frame.loading = 'eager';
    frame.src = url.pathname + url.search;
  }
}

// Deep links: #section, #widget, #widget:step=K (from 1, as the stepper's URLs).
function followHash() {
  const m = /^#([a-z0-9-]+)(?::step=(\d+))?$/.exec(location.hash);
  if (!m) return;
  const el = document.getElementById(m[1]);
  if (!el) return;
  if (m[2] !== undefined && el.matches('figure.widget')) showStep(el, Number(m[2]));
  else el.scrollIntoView({ block: 'start' });
}

// ---- checkpoints ----

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
    for (const attr of ['src', 'data-base-src']) {
      const url = new URL(frame.getAttribute(attr), location.origin);
      if (!url.searchParams.has('hold')) continue;
      url.searchParams.delete('hold');
      // A frame not yet loaded loads without the hold; a running one was told.
      if (attr === 'data-base-src' || fig.dataset.current === undefined) frame.setAttribute(attr, url.pathname + url.search);
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
function updateRevisit() {
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

function initCheckpoints() {
  for (const cp of $$('section.checkpoint')) {
    const form = $('form', cp);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      submitCheckpoint(cp, false);
    });
    $('[data-action="reveal"]', cp).addEventListener('click', () => submitCheckpoint(cp, true));
    const saved = progress.get(data.slug, cp.dataset.checkpoint);
    if (saved) showVerdict(cp, { ...saved, hint: '' });
  }
}

function updateLessonProgress() {
  if (!data.slug) return;
  const state = progress.lessonState(data.slug, data.checkpoints || []);
  document.body.dataset.lessonState = state;
  progress.markCourseMap();
}

// ---- the course map ----

function initCourseMap() {
  const { next, done, total } = progress.markCourseMap();
  const go = $('#course-next');
  if (go) {
    if (next && done > 0) {
      go.href = next;
      go.textContent = 'Continue the course';
    } else if (!next && total > 0) {
      go.textContent = 'Start again from lesson 1';
    }
  }
  const summary = $('#progress-summary');
  if (summary && total) summary.textContent = `${done} of ${total} lessons done.`;
  // Two clicks, so one stray click does not erase everything.
  const reset = $('#progress-reset');
  if (reset) {
    let armed = false;
    reset.addEventListener('click', () => {
      if (!armed) {
        armed = true;
        reset.textContent = 'Click again to erase your progress';
        setTimeout(() => { armed = false; reset.textContent = 'Reset my progress'; }, 5000);
        return;
      }
      progress.reset();
      location.reload();
    });
  }
}

// ---- keyboard and projector mode ----

function typing(el) {
  return el && (el.isContentEditable || /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(el.tagName));
}

const stops = () => $$('figure.widget, section.checkpoint');
let current = 0;

function setProjectorWidget(el) {
  const all = stops();
  const k = all.indexOf(el);
  if (k < 0) return;
  current = k;
  all.forEach((s, n) => s.classList.toggle('on-stage', n === k));
  const counter = $('#stage-counter');
  if (counter) counter.textContent = `${k + 1} of ${all.length}`;
}

function stageMove(delta) {
  const all = stops();
  if (!all.length) return;
  const k = Math.min(Math.max(current + delta, 0), all.length - 1);
  setProjectorWidget(all[k]);
  all[k].scrollIntoView({ behavior: 'smooth', block: 'start' });
}

function setProjector(on) {
  document.body.classList.toggle('projector', on);
  const t = $('#projector-toggle');
  if (t) t.setAttribute('aria-pressed', String(on));
  try { localStorage.setItem('flashstep-projector', on ? '1' : ''); } catch { /* unsaved */ }
  // Put on stage the first widget or checkpoint still in view.
  if (on) setProjectorWidget(stops().find((el) => el.getBoundingClientRect().bottom > 0) || stops()[0]);
}

function initProjector() {
  const t = $('#projector-toggle');
  if (!t) return;
  const bar = document.createElement('div');
  bar.className = 'stage-bar';
  bar.innerHTML = '<button type="button" data-move="-1" aria-label="Previous widget">↑</button>' +
    '<span id="stage-counter"></span>' +
    '<button type="button" data-move="1" aria-label="Next widget">↓</button>' +
    '<button type="button" data-exit>Exit projector</button>';
  document.body.append(bar);
  bar.addEventListener('click', (ev) => {
    const b = ev.target.closest('button');
    if (!b) return;
    if (b.dataset.move) stageMove(Number(b.dataset.move));
    else setProjector(false);
  });
  t.addEventListener('click', () => setProjector(!document.body.classList.contains('projector')));
  if (localStorage.getItem('flashstep-projector') === '1') setProjector(true);
}

document.addEventListener('keydown', (ev) => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey || typing(document.activeElement)) return;
  if (ev.key === 'ArrowLeft' && data.prev) location.href = siteURL(data.prev);
  else if (ev.key === 'ArrowRight' && data.next) location.href = siteURL(data.next);
  else if ((ev.key === 'p' || ev.key === 'P') && $('#projector-toggle')) setProjector(!document.body.classList.contains('projector'));
  else if (document.body.classList.contains('projector') && (ev.key === 'j' || ev.key === 'k')) stageMove(ev.key === 'j' ? 1 : -1);
  else return;
  ev.preventDefault();
});

// The page's widgets (its frames) that show the same run read one stream.
installRunHub();
const typeset_ = typeset();
widgetFrames();
initCheckpoints();
initCourseMap();
initMemoryCalculators();
initPlaygrounds();
initLoopWidgets();
initProjector();
updateLessonProgress();
updateRevisit();
// A deep link scrolls once the formulas above its target have their height.
typeset_.then(followHash);
window.addEventListener('hashchange', followHash);
