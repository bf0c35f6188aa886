// The stepper's layouts: the projector layout, which fits the key views
// on one screen with large numbers for a room to read, and, in a lesson's
// frame, a view of an idea a later lesson teaches replaced by the lesson's
// name.
import { $, know, state } from './stepper_page.js';
import { render } from './stepper_panels.js';

// setProjector fits the key views (tile grid, S, P, the m, α, l table and O)
// on one screen with large numbers, for a room to read; the choice is kept.
export function setProjector(on) {
  document.body.classList.toggle('projector', on);
  $('projector').setAttribute('aria-pressed', String(on));
  try { localStorage.setItem('flashstep.projector', on ? '1' : '0'); } catch { /* private mode */ }
  if (on) $('run-settings').open = false;
  if (state.model && state.k >= 0) render();
}
$('projector').onclick = () => setProjector(!document.body.classList.contains('projector'));

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (state.model && state.k >= 0) render(); }, 100);
});

// A view of an idea a later lesson teaches says which lesson, in place of
// its numbers.
const UNTAUGHT_VIEWS = {
  bytes: ['memory', 'The bytes each step moves to and from device memory'],
  timeline: ['gpu', 'Which of the GPU\'s SMs ran each step, and when'],
};
for (const [name, [idea, what]] of Object.entries(UNTAUGHT_VIEWS)) {
  if (know.knows(idea)) continue;
  const fig = document.querySelector(`[data-panel="${name}"]`);
  const p = document.createElement('p');
  p.className = 'note untaught-note';
  p.textContent = `${what}: ${know.lesson(idea)}.`;
  fig.classList.add('untaught');
  fig.append(p);
}
