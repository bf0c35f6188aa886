// A page framed by a lesson tells the lesson its height, so the frame fits
// the views without a scroll bar of its own, and its steps (postStep).

export function reportSize() {
  if (window.parent === window) return;
  let last = 0;
  const send = () => {
    const h = document.documentElement.scrollHeight;
    if (Math.abs(h - last) < 2) return;
    last = h;
    window.parent.postMessage({ type: 'flashstep-size', height: h }, location.origin);
  };
  new ResizeObserver(send).observe(document.body);
  send();
}

// A lesson holds many framed widgets; building one (its run streamed,
// decoded and drawn) holds the lesson's main thread, which its frames
// share. whenWanted resolves when a framed page should build what it
// shows. A frame in a lesson's widget (figure.widget) waits for the lesson
// to want it: lesson.js marks the figure data-wanted and posts
// flashstep-build when the widget comes near the viewport, when its frame
// is asked to load at once (loading="eager") or when the lesson moves it;
// wanted() builds it from inside (a step asked for). Any other page builds
// at once.
let wantNow = null;

function lessonWidget() {
  try { return window.frameElement?.closest('figure.widget') || null; } catch { return null; } // cross-origin: not a lesson's
}

// waitsToBeWanted says whether whenWanted will wait: the page is a lesson's
// widget the lesson has not asked for yet.
export function waitsToBeWanted() {
  const fig = lessonWidget();
  return Boolean(fig) && fig.dataset.wanted !== '1';
}

export function whenWanted() {
  const fig = lessonWidget();
  if (!fig || fig.dataset.wanted === '1') return Promise.resolve();
  return new Promise((resolve) => {
    const heard = (ev) => {
      if (ev.origin === location.origin && ev.source === window.parent && ev.data?.type === 'flashstep-build') go();
    };
    const go = () => {
      if (!wantNow) return;
      wantNow = null;
      window.removeEventListener('message', heard);
      resolve();
    };
    wantNow = go;
    window.addEventListener('message', heard);
  });
}

// wanted builds a page that waits in whenWanted at once.
export function wanted() { wantNow?.(); }
