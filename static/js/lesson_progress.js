// A student's progress through the course, kept in this browser only
// (localStorage): for each checkpoint, how it was last settled (answered
// right, or revealed) with the explanation the server gave, so a reload
// shows it again without asking the server.
const KEY = 'flashstep-progress-v1';

function load() {
  try {
    const v = JSON.parse(localStorage.getItem(KEY) || '{}');
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {}; // a damaged entry is progress lost, not a broken page
  }
}

export function get(slug, id) { return load()[`${slug}/${id}`] || null; }

export function set(slug, id, entry) {
  const all = load();
  all[`${slug}/${id}`] = { ...entry, at: Date.now() };
  try {
    localStorage.setItem(KEY, JSON.stringify(all));
  } catch {
    // Storage full or refused (private mode): the page still works, unsaved.
  }
}

export function reset() { localStorage.removeItem(KEY); }

// lessonState says how far a lesson is: 'done' when every checkpoint is
// settled, 'started' when some are, else 'new'.
export function lessonState(slug, ids) {
  const all = load();
  const settled = ids.filter((id) => all[`${slug}/${id}`]).length;
  if (ids.length > 0 && settled === ids.length) return 'done';
  return settled > 0 ? 'started' : 'new';
}

// markCourseMap writes done / next on every course map of the page and
// returns the href of the next lesson to take (null when all are done).
export function markCourseMap() {
  let next = null;
  let done = 0;
  const items = document.querySelectorAll('.course-map .course-lesson');
  for (const li of items) {
    const ids = (li.dataset.checkpoints || '').split(' ').filter(Boolean);
    const state = lessonState(li.dataset.slug, ids);
    li.classList.toggle('done', state === 'done');
    li.classList.toggle('started', state === 'started');
    li.classList.remove('next');
    let label = state === 'done' ? '✓ done' : state === 'started' ? 'started' : '';
    if (state === 'done') done++;
    else if (!next) {
      next = li.querySelector('a').getAttribute('href');
      li.classList.add('next');
      label = state === 'started' ? 'started · next' : 'next';
    }
    li.querySelector('.course-status').textContent = label;
  }
  return { next, done, total: items.length };
}
