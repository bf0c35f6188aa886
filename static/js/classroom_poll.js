// A room's polls: the question, the answer form fitted to it (a number,
// an option, tiles), the tally of answers as it comes in and the answer
// revealed; on the presenter's page, the buttons that open, reveal and
// close a poll. classroom.js owns the connection and hands each poll and
// tally here.

const $ = (id) => document.getElementById(id);

// The room's state, its presenter flag, and how to send to it and say
// something under the bar (classroom.js's), set by initPolls.
let st, presenter, send, note;

// initPolls wires the answer form and the presenter's poll buttons.
export function initPolls(room) {
  ({ st, presenter, send, note } = room);
  $('room-answer-form')?.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const options = st.poll?.format === 'choice';
    const box = options ? $('room-choice') : $('room-answer');
    const a = box.value.trim();
    if (!a) return note(options ? 'Pick one of the options first.' : 'Type a number first.', true);
    st.myAnswer = a;
    st.myLabel = options ? box.selectedOptions[0].textContent : '';
    send({ type: 'answer', answer: a });
    note(`Answer sent: ${st.myLabel || a}. You may change it until the presenter reveals the answer.`);
  });

  $('poll-open')?.addEventListener('click', () => { note(''); send({ type: 'poll' }); });
  $('poll-checkpoint')?.addEventListener('click', () => { note(''); send({ type: 'poll', poll: 'checkpoint' }); });
  $('poll-reveal')?.addEventListener('click', () => {
    send({ type: 'reveal' });
    // The step that shows the answer: the whole room goes there.
    if (st.poll?.step) document.dispatchEvent(new CustomEvent('flashstep:go', { detail: { step: st.poll.step } }));
  });
  $('poll-close')?.addEventListener('click', () => send({ type: 'close_poll' }));
}

// The tally counts students, not connections (two tabs of one student are
// one), and only the answers of the students present now: a student who
// left stops counting, and counts again with its answer when back.
export function showTally(t) {
  const el = $('room-counts');
  if (!el) return;
  const students = t.students === 1 ? '1 student' : `${t.students} students`;
  el.textContent = t.students ? `${students}: ${t.following} following, ${t.branched} branched` : 'no students yet';
  el.dataset.students = String(t.students);
  el.dataset.following = String(t.following);
  el.dataset.branched = String(t.branched);
  if (t.lab) {
    // A lab room: who ran their code on the exercise, and who passed.
    const waiting = t.students - t.lab.tried;
    el.textContent = t.students
      ? `${students}: ${t.lab.passed} passed, ${t.lab.tried - t.lab.passed} tried and not passed yet, ${waiting} not run yet`
      : 'no students yet';
    el.dataset.passed = String(t.lab.passed);
    el.dataset.tried = String(t.lab.tried);
  }
  if (st.poll?.status === 'open') {
    drawBins(t.bins);
    const present = t.students === 1 ? 'the 1 student present' : `the ${t.students} students present`;
    $('room-reveal').textContent = `${t.answered} answered of ${present}${t.invalid ? ` (${t.invalid} not a number)` : ''}`;
    $('room-poll').dataset.answered = String(t.answered);
    $('room-poll').dataset.students = String(t.students);
  }
}

function drawBins(bins) {
  const el = $('room-hist');
  el.replaceChildren();
  const most = Math.max(1, ...bins.map((b) => b.count));
  for (const b of bins) {
    const bar = document.createElement('div');
    // An option's or a set of tiles' bar is labelled with it; a number's
    // with where its range starts.
    bar.className = `bar${b.correct ? ' correct' : ''}${b.label ? ' category' : ''}`;
    bar.style.height = `${(b.count / most) * 100}%`;
    bar.title = b.label ? `${b.label}: ${b.count}` : `${b.lo.toFixed(2)} to ${b.hi.toFixed(2)}: ${b.count}`;
    const n = document.createElement('span');
    n.textContent = String(b.count);
    const lo = document.createElement('i');
    lo.textContent = b.label || b.lo.toFixed(2);
    bar.append(n, lo);
    el.append(bar);
  }
}

export function showPoll(p) {
  const box = $('room-poll');
  const changed = p?.id !== st.poll?.id;
  st.poll = p;
  box.hidden = !p;
  if ($('poll-reveal')) {
    $('poll-reveal').hidden = p?.status !== 'open';
    $('poll-close').hidden = !p;
  }
  if (!p) { $('room-hist').replaceChildren(); $('room-reveal').textContent = ''; return; }
  $('room-question').textContent = p.unit ? `${p.question} (${p.unit})` : p.question;
  box.dataset.status = p.status;
  box.dataset.format = p.format || 'number';
  const form = $('room-answer-form');
  if (changed) {
    st.myAnswer = '';
    if (form) answerInput(p);
    $('room-hist').replaceChildren();
    $('room-reveal').textContent = '';
  }
  if (form) form.hidden = p.status !== 'open';
  if (p.status === 'revealed') {
    drawBins(p.bins || []);
    let mine = '';
    if (!presenter && st.myAnswer !== '') {
      const shown = st.myLabel || st.myAnswer;
      mine = isRight(p, st.myAnswer) ? ` Your answer ${shown} is right.` : ` Your answer was ${shown}.`;
    }
    $('room-reveal').textContent = `Answer: ${p.answer}. ${p.correct} of ${p.answered} right.${mine} ${p.explain}`;
  }
}

// answerInput fits the answer form to the poll: a number, one of the
// options of a lesson's multiple-choice checkpoint, or tiles.
function answerInput(p) {
  const input = $('room-answer');
  const choice = $('room-choice');
  const options = p.format === 'choice';
  input.value = '';
  input.hidden = options;
  choice.hidden = !options;
  input.inputMode = p.format === 'tiles' ? 'text' : 'decimal';
  input.placeholder = p.format === 'tiles' ? '0,1; 1,2 or none' : '';
  choice.replaceChildren(new Option('choose…', ''), ...(options ? p.choices : []).map((c) => new Option(c.label, c.value)));
}

// tilesKey is a set of tiles ("0,1; 1,2") in one order, or 'none'.
export const tilesKey = (s) => {
  const parts = [...new Set(s.split(/[;\s]+/).filter(Boolean))].sort();
  return !parts.length || (parts.length === 1 && parts[0].toLowerCase() === 'none') ? 'none' : parts.join(';');
};

// isRight says whether answer is poll p's: its option, its tiles, or its
// number within the poll's tolerance ("−3" read as -3).
export function isRight(p, answer) {
  if (p.format === 'choice') return answer === p.key;
  if (p.format === 'tiles') return tilesKey(answer) === p.key;
  return Math.abs(Number(answer.replace(/[−–\s]/g, (c) => (c.trim() ? '-' : ''))) - p.number) <= (p.tol || 0); // a whole number has no tolerance
}
