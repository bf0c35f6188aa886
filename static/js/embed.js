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
