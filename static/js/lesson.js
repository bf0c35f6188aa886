// A lesson page and the course map: any formula not typeset by the server, the course
// map's progress, keyboard navigation between lessons, and the start of
// every part of the page: its embedded steppers (lesson_widgets.js), its
// checkpoints (lesson_checkpoints.js), its projector mode (lesson_stage.js)
// and its widgets drawn in the page itself.
import * as progress from './lesson_progress.js';
import { followHash, widgetFrames } from './lesson_widgets.js';
import { initCheckpoints, updateLessonProgress, updateRevisit } from './lesson_checkpoints.js';
import { initProjector, setProjector, stageMove } from './lesson_stage.js';
import { initMemoryCalculators } from './lesson_memory.js';
import { initPlaygrounds } from './playground.js';
import { initLoopWidgets } from './lesson_loop.js';
import { installRunHub } from './stream.js';
import { siteURL } from './site.js';
import { loadKatex } from './format.js';

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const data = JSON.parse($('#lesson-data')?.textContent || '{}');

// ---- math ----

// typeset: a lesson's formulas arrive typeset by the server (lessons/
// maths.go, class "typeset"); one a lesson gained since its last `make
// generate` arrives as TeX, and is typeset here with KaTeX, loaded for it,
// those in view first, a slice at a time. It resolves when none is left.
function typeset() {
  const maths = $$('.math:not(.typeset)');
  if (!maths.length) return Promise.resolve();
  return (loadKatex() ?? Promise.resolve(null)).then((katex) => new Promise((resolve) => {
    if (!katex) {
      // A server built without its browser libraries (no `make assets`)
      // has no KaTeX: say why the formulas read as LaTeX.
      const note = document.createElement('p');
      note.className = 'note no-katex';
      note.setAttribute('role', 'status');
      note.textContent = 'The formulas on this page are shown as raw LaTeX: this server was built without its browser libraries (run `make assets`, then build and start it again).';
      maths[0].closest('article, main, body').prepend(note);
      // Shown as they are, at once: nothing will set them.
      for (const el of maths) el.classList.add('typeset');
      return resolve();
    }
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
        katex.render(el.textContent, el, { displayMode: el.classList.contains('display'), throwOnError: false });
        el.classList.add('typeset');
      }
      if (queue.length) setTimeout(slice, 0);
      else resolve();
    };
    slice();
  }));
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

// ---- the keyboard ----

function typing(el) {
  return el && (el.isContentEditable || /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(el.tagName));
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
initCheckpoints(data);
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
