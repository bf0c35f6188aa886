// A lesson's embedded steppers: each framed widget is built when the lesson
// wants it, reports the step it shows, and is moved to a step by a deep
// link (#widget:step=K) or a checkpoint's answer.
import { setProjectorWidget } from './lesson_stage.js';

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// Each framed widget hears from its page which step it shows.
const frames = new Map(); // contentWindow -> widget element

// A framed widget loads its page and builds itself (streams its run,
// decodes it, draws it) only when the lesson wants it (embed.js's
// whenWanted): when it comes within WANT_MARGIN of the viewport, when its
// frame is asked to load at once (loading="eager"), or when the lesson
// moves it to a step. Its frame comes with no src (the page names it in
// data-src): a lesson with a dozen widgets otherwise built them all as it
// loaded, and held the main thread, which its frames share, for a second;
// and the browser's own lazy loading loads frames far below the fold
// (lesson 1's three, at 1.3, 2.7 and 3.5 thousand pixels, each a page, its
// modules and its run, before the reader can scroll).
const WANT_MARGIN = '600px';

function want(fig) {
  const frame = $('iframe', fig);
  if (frame && !frame.getAttribute('src')) frame.src = frame.dataset.src;
  if (fig.dataset.wanted === '1') return;
  fig.dataset.wanted = '1';
  // A frame whose page has not loaded yet reads data-wanted when it does.
  frame?.contentWindow?.postMessage({ type: 'flashstep-build' }, location.origin);
}

export function widgetFrames() {
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
export function showStep(fig, k) {
  const frame = $('iframe', fig);
  if (!frame) return;
  setProjectorWidget(fig);
  fig.scrollIntoView({ behavior: 'smooth', block: 'start' });
  if (fig.dataset.current !== undefined) {
    // The page inside is running: ask it to move.
    want(fig);
    frame.contentWindow.postMessage({ type: 'flashstep-go', step: k }, location.origin);
  } else {
    const url = new URL(frame.dataset.baseSrc, location.origin);
    url.searchParams.set('step', String(k));
    frame.src = url.pathname + url.search;
    want(fig);
  }
}

// Deep links: #section, #widget, #widget:step=K (from 1, as the stepper's URLs).
export function followHash() {
  const m = /^#([a-z0-9-]+)(?::step=(\d+))?$/.exec(location.hash);
  if (!m) return;
  const el = document.getElementById(m[1]);
  if (!el) return;
  if (m[2] !== undefined && el.matches('figure.widget')) showStep(el, Number(m[2]));
  else el.scrollIntoView({ block: 'start' });
}
