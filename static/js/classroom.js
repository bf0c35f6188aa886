// The classroom: a page in a room follows the presenter's steps, or, on the
// presenter's page, drives them. It moves the stepper (or the side by side)
// only through the page's events: it hears `flashstep:step` for every step
// shown and sends `flashstep:go` and `flashstep:run`. The trace never comes
// through the room: the stepper fetches each run's trace itself, once.
import { fmtBytes } from './format.js';
import { initPolls, showPoll, showTally } from './classroom_poll.js';

const $ = (id) => document.getElementById(id);
const room = JSON.parse($('room-data').textContent);
const presenter = room.presenter;
const roomURL = `/r/${room.code}`;
// A lab page in a room: the presenter put exercise room.lab in front of
// it. Students write their own code; the room counts who passed.
const onLab = room.page === 'lab';

// elsewhere says whether the room now shows what this page cannot: a lab
// exercise on a stepper's page, a run or another exercise on a lab page.
// The page then reloads the room's address, which renders what it shows
// (a lab page's code is kept in the browser, so nothing is lost).
function elsewhere(page, query) {
  return onLab ? page !== 'lab' || query !== room.lab : page === 'lab';
}

// Close codes the server ends a room's connection with (classroom/ws.go, problem.Code.CloseCode):
// each is final, the page says why and stops reconnecting.
// 1001 is not among them: the server that held the connection is leaving,
// the room goes on, and the page reconnects (to another server, through
// the load balancer). Nor is 4029 (too many joins or wrong codes from this
// address, which a whole class behind one NAT shares): the reason says in
// how many seconds to retry, and the page does.
const FINAL = { 4000: 'ended', 4001: 'expired', 4003: 'forbidden', 4004: 'gone', 4009: 'full', 4010: 'lost', 1012: 'restart' };
const LIMITED = 4029;

const st = {
  query: null, // the room's run
  page: room.page,
  step: 0, // the room's step, from 1
  total: 0,
  seq: 0,
  following: true,
  synced: !presenter, // a presenter's page speaks once it shows the room's step
  applying: false, // a step we caused is being shown
  userAt: 0, // when the student last touched the stepper
  poll: null,
  myAnswer: '',
  myLabel: '', // the option's label, for a multiple-choice poll
  closed: false,
  opened: false,
  failures: 0,
  limited: false, // refused for a while (4029): the note says why until we are back
  ws: null,
  sse: null, // {source, member, key} over the HTTP fallback
};

function note(text, error = false) {
  const el = $('room-note');
  el.textContent = text;
  el.classList.toggle('error', error);
}

// The stepper keeps its URL on /step?<run>; a room's page keeps the room's
// address, so a reload comes back to the room.
let urlTimer = null;
function keepURL() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => history.replaceState(null, '', roomURL + location.hash), 250);
}

// ---- the connection ----

function send(msg) {
  if (st.ws?.readyState === WebSocket.OPEN) {
    st.ws.send(JSON.stringify(msg));
    return;
  }
  if (st.sse?.key) {
    fetch(`${roomURL}/send`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ member: st.sse.member, key: st.sse.key, message: msg }),
    }).then(async (res) => {
      if (!res.ok) note((await res.json().catch(() => ({}))).error || `HTTP ${res.status}`, true);
    });
  }
}

function connect() {
  if (st.closed) return;
  if (new URLSearchParams(location.search).get('transport') === 'http' || st.failures >= 2) return connectHTTP();
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}${roomURL}/ws`);
  st.ws = ws;
  let opened = false;
  ws.onopen = () => { opened = true; st.failures = 0; };
  ws.onmessage = (ev) => handle(JSON.parse(ev.data));
  ws.onclose = (ev) => {
    st.ws = null;
    if (FINAL[ev.code]) return ended(ev.code, ev.reason);
    if (ev.code === LIMITED) {
      const secs = Number(/retry in (\d+) s/.exec(ev.reason)?.[1] || 10);
      setStatus('Waiting to reconnect…');
      note(ev.reason || 'Too many joins from this network: retrying shortly.', true);
      st.limited = true;
      setTimeout(connect, Math.min(secs, 120) * 1000);
      return;
    }
    if (!opened) st.failures++;
    // A network drop: come back; hello then puts us on the current step.
    setStatus('Reconnecting…');
    setTimeout(connect, Math.min(500 * 2 ** Math.min(st.failures, 4), 8000));
  };
}

// connectHTTP follows the room over server-sent events where websockets
// are blocked; messages go up by POST.
function connectHTTP() {
  const source = new EventSource(`${roomURL}/events`);
  st.sse = { source };
  source.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === 'session') {
      st.sse.member = msg.member;
      st.sse.key = msg.key;
      return;
    }
    handle(msg);
    // A server that leaves ends the stream; EventSource then reconnects.
    if (msg.type === 'closed' && msg.why !== 'moved') source.close();
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED && !st.closed) {
      ended(4004, 'This room is not on the server any more: it may have ended, expired, or the server restarted.');
    }
  };
}

function ended(code, reason) {
  if (st.closed) return; // the closed event, then the close frame: the first says why
  st.closed = true;
  const text = reason || 'The room ended.';
  setStatus(`Room ended: ${text}`, 'closed');
  note(text, true);
  document.body.dataset.roomClosed = String(code);
  for (const id of ['poll-open', 'poll-checkpoint', 'poll-reveal', 'poll-close', 'room-end', 'room-rejoin']) {
    if ($(id)) $(id).disabled = true;
  }
}

// ---- what the room says ----

function handle(ev) {
  switch (ev.type) {
    case 'hello':
      if (elsewhere(ev.page, ev.query)) return location.assign(roomURL);
      kernels(Boolean(ev.kernels_off));
      if (st.limited) { st.limited = false; note(''); } // back in after a limit's wait
      st.seq = ev.seq;
      st.step = ev.step;
      st.total = ev.total;
      if (!presenter) {
        const newRun = st.query !== null && ev.query !== st.query;
        st.query = ev.query;
        st.page = ev.page;
        setStatus(st.following ? 'Following the presenter' : 'Branched off');
        // A reconnect is a new member, following until told otherwise.
        if (!st.following) send({ type: 'status', status: 'branched' });
        if (st.following && newRun) runRoom();
        else if (st.following && st.step > 0) goRoom();
      } else {
        st.query = ev.query;
        setStatus();
        measure(ev.query);
      }
      showPoll(ev.poll || null);
      return;
    case 'run':
      if (ev.seq <= st.seq) return;
      if (elsewhere(ev.page, ev.query)) return location.assign(roomURL);
      st.seq = ev.seq;
      st.query = ev.query;
      st.page = ev.page;
      st.step = ev.step;
      if (presenter) return measure(ev.query);
      if (st.following) runRoom();
      return;
    case 'step':
      if (ev.seq <= st.seq) return;
      st.seq = ev.seq;
      st.step = ev.step;
      st.total = ev.total;
      if (!presenter && st.following) goRoom();
      return;
    case 'poll':
      if (ev.seq) st.seq = Math.max(st.seq, ev.seq);
      showPoll(ev.poll || null);
      return;
    case 'tally':
      return showTally(ev.tally);
    case 'kernels':
      if (ev.seq) st.seq = Math.max(st.seq, ev.seq);
      return kernels(Boolean(ev.kernels_off));
    case 'notice':
      return note(ev.error, true);
    case 'closed':
      if (ev.why === 'moved') {
        // This server is leaving; the room is not. The connection closes
        // and the page reconnects, landing on the room's current step.
        setStatus('Reconnecting…');
        return note(ev.reason);
      }
      return ended(ev.why, ev.reason);
  }
}

function goRoom() {
  st.applying = true;
  document.dispatchEvent(new CustomEvent('flashstep:go', { detail: { step: st.step } }));
  st.applying = false;
}

function runRoom() {
  st.applying = true;
  document.dispatchEvent(new CustomEvent('flashstep:run', { detail: { query: st.query, step: Math.max(st.step, 1) } }));
  st.applying = false;
}

function setStatus(text, cls = '') {
  const el = $('room-status');
  if (!el) return;
  if (onLab && text && !cls) text = 'In the room: the presenter put this exercise in front of the class. Your verdicts are counted.';
  el.textContent = text ?? el.textContent;
  el.className = `room-status ${cls || (st.following ? '' : 'branched')}`;
  const rejoin = $('room-rejoin');
  if (rejoin) rejoin.hidden = st.following || st.closed;
}

// ---- the page's steps ----

// A student who touches the stepper has branched off; the room keeps
// going, and Rejoin snaps back.
function touched(ev) {
  if (presenter || st.closed || ev.target.closest?.('#room-bar')) return;
  if (ev.type === 'keydown' && !['ArrowLeft', 'ArrowRight', 'Home', 'End', ' '].includes(ev.key)) return;
  if (ev.type === 'keydown' && ev.target.closest('input, select, textarea')) return;
  st.userAt = performance.now();
  branch();
}
function branch() {
  if (!st.following) return;
  st.following = false;
  setStatus('Branched off: you are stepping on your own');
  send({ type: 'status', status: 'branched' });
}
const stepper = document.querySelector('#stepper, .compare');
for (const type of ['pointerdown', 'wheel']) stepper?.addEventListener(type, touched, { capture: true, passive: true });
document.addEventListener('keydown', touched, { capture: true });
stepper?.addEventListener('change', touched, { capture: true });

$('room-rejoin')?.addEventListener('click', () => {
  st.following = true;
  setStatus('Following the presenter');
  send({ type: 'status', status: 'following' });
  if (st.query && lastShown.query && st.query !== lastShown.query) runRoom();
  else goRoom();
});

let lastShown = {};
document.addEventListener('flashstep:step', (ev) => {
  const d = ev.detail;
  lastShown = d;
  keepURL();
  if (presenter) return presenterStep(d);
  // A following page that is still loading its trace could not reach the
  // room's step yet: once it has the step, go there.
  if (st.following && !st.applying && st.step > 0 && d.step !== st.step && d.total >= st.step && d.query === st.query) goRoom();
});

// presenterStep sends the presenter's step, or the new run when the
// presenter ran something else from the form.
let lastSent = '';
function presenterStep(d) {
  if (!st.synced) {
    // The page opens at the room's step; the steps it shows on the way
    // there (its trace still arriving) are not the presenter's.
    if (d.step !== st.step && st.step > 0 && d.query === st.query && d.total < st.step) return;
    st.synced = true;
  }
  if (d.query && d.query !== st.query) {
    st.query = d.query;
    send({ type: 'run', page: room.page, query: d.query, step: d.step });
    measure(d.query);
    lastSent = '';
    return;
  }
  const key = `${d.step}/${d.total}`;
  if (key === lastSent) return;
  lastSent = key;
  send({ type: 'step', step: d.step, total: d.total });
}

// ---- the presenter's figures ----

async function measure(query) {
  const el = $('room-bytes');
  if (!el || !query || onLab) return;
  el.textContent = 'Each student downloads the trace once: measuring…';
  const res = await fetch(`/api/trace/bytes?${query}`);
  if (!res.ok) { el.textContent = 'Could not measure the trace.'; return; }
  const b = await res.json();
  // The websocket sends the trace as it is; the HTTP fallback gzips it.
  // Float arrays hardly compress, and the figure says so.
  el.textContent = `Each student downloads ${fmtBytes(b.raw)} once before following (${fmtBytes(b.gzip)} gzipped over the HTTP fallback: float arrays hardly compress).`;
  el.dataset.raw = String(b.raw);
  el.dataset.compressed = String(b.gzip);
}

// ---- polls ----

initPolls({ st, presenter, send, note });

// ---- the lab ----

// kernels passes the room's switch of the kernel track to the lab page
// (lab.js), and shows it on the presenter's.
function kernels(off) {
  if ($('room-kernels')) $('room-kernels').checked = !off;
  document.dispatchEvent(new CustomEvent('flashstep:kernels', { detail: { off } }));
}
$('room-lab')?.addEventListener('change', (ev) => {
  if (ev.target.value) send({ type: 'run', page: 'lab', query: ev.target.value });
});
$('room-lab-run')?.addEventListener('click', () => send({ type: 'run', page: 'step', query: room.lab_run, step: 1 }));
$('room-kernels')?.addEventListener('change', (ev) => send({ type: 'kernels', answer: ev.target.checked ? 'on' : 'off' }));
// A student's verdict on the exercise, from lab.js: the room counts it
// (a kernel's by its ticket, whose verdict the server reads itself).
document.addEventListener('flashstep:lab-result', (ev) => {
  if (!presenter && onLab) send({ type: 'lab_result', answer: ev.detail.verdict === 'pass' ? 'pass' : 'fail', ticket: ev.detail.ticket });
});
$('room-end')?.addEventListener('click', () => {
  if (confirm('End the room for every student?')) send({ type: 'end' });
});

connect();
