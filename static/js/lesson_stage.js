// A lesson's projector mode: one widget or checkpoint on stage at a time,
// a bar to move between them, the choice kept in this browser.

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// The stops on stage, in page order, and the one on it now.
const stops = () => $$('figure.widget, section.checkpoint');
let current = 0;

// setProjectorWidget puts el (a widget or a checkpoint) on stage.
export function setProjectorWidget(el) {
  const all = stops();
  const k = all.indexOf(el);
  if (k < 0) return;
  current = k;
  all.forEach((s, n) => s.classList.toggle('on-stage', n === k));
  const counter = $('#stage-counter');
  if (counter) counter.textContent = `${k + 1} of ${all.length}`;
}

// stageMove puts the stop delta after the current one on stage.
export function stageMove(delta) {
  const all = stops();
  if (!all.length) return;
  const k = Math.min(Math.max(current + delta, 0), all.length - 1);
  setProjectorWidget(all[k]);
  all[k].scrollIntoView({ behavior: 'smooth', block: 'start' });
}

// setProjector turns projector mode on or off.
export function setProjector(on) {
  document.body.classList.toggle('projector', on);
  const t = $('#projector-toggle');
  if (t) t.setAttribute('aria-pressed', String(on));
  try { localStorage.setItem('flashstep-projector', on ? '1' : ''); } catch { /* unsaved */ }
  // Put on stage the first widget or checkpoint still in view.
  if (on) setProjectorWidget(stops().find((el) => el.getBoundingClientRect().bottom > 0) || stops()[0]);
}

// initProjector adds the stage bar and the toggle's handler.
export function initProjector() {
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
