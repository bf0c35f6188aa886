// The page's one tooltip (#tip): the views write the value or the words of
// what is under the pointer into it, beside the pointer.

const tip = () => document.getElementById('tip');

export function showTip(ev, text) {
  const t = tip();
  if (!t) return;
  t.textContent = text;
  t.hidden = false;
  t.style.left = `${ev.clientX + 14}px`;
  t.style.top = `${ev.clientY + 14}px`;
}

export function hideTip() { const t = tip(); if (t) t.hidden = true; }
