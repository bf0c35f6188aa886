// How numbers are written for people, and how big: a float32 in a few
// significant digits (−∞ for a masked score), a byte count in binary units,
// round steps for an axis's ticks, the smallest size a number is printed at
// in a view, and a formula typeset with KaTeX. Nothing here touches the
// page as the module loads: Node's tests import it without one.
import { siteURL } from './site.js';
import { typesetHeads } from './formulas_gen.js';

// fmt writes a float32 for people: four significant digits, −∞ for masked.
export function fmt(v, digits = 4) {
  if (v === -Infinity) return '−∞';
  if (v === Infinity) return '+∞';
  if (Number.isNaN(v)) return 'NaN';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(digits - 2).replace('-', '−');
  return Number(v.toPrecision(digits)).toString().replace('-', '−');
}

// fmtBytes writes a byte count in binary units: 512 B, 1.50 KiB, 12.3 MiB.
export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

// MIN_FONT_PX is the smallest a number is printed in a view: 12 CSS
// pixels, legible in a lesson's frame on a laptop.
export const MIN_FONT_PX = 12;

// niceStep rounds a tick spacing to 1, 2 or 5 times a power of ten.
export function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  const f = x / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

// tex typesets a formula with KaTeX into an element. A stepper heading
// (formulas.js) comes typeset from formulas_gen.js, so the stepper loads
// no KaTeX (270 KiB of script parsed in every embedded frame of a lesson
// cost the lesson its start). Any other formula on a page without KaTeX
// loads it on the first call: the formula is written plainly at once and
// typeset when the script arrives, unless the element was given another
// formula meanwhile. With no KaTeX to be had (no document, or a server
// built without its libraries) it stays plain.
export function tex(el, formula, options = {}) {
  waiting.delete(el); // a formula asked of el before this one is no longer wanted
  const pre = options.output === 'html' && !options.displayMode && Object.hasOwn(typesetHeads, formula) ? typesetHeads[formula] : undefined;
  if (pre) {
    el.innerHTML = pre;
    return el;
  }
  if (globalThis.katex) {
    globalThis.katex.render(formula, el, { throwOnError: false, ...options });
    return el;
  }
  el.textContent = formula;
  const asked = { formula, options };
  waiting.set(el, asked);
  loadKatex()?.then((katex) => {
    if (waiting.get(el) !== asked) return; // another formula was asked of el since
    waiting.delete(el);
    if (katex && el.isConnected) katex.render(formula, el, { throwOnError: false, ...options });
  });
  return el;
}

const waiting = new WeakMap(); // element -> the last formula asked of it
let katexLoad = null;

// loadKatex adds KaTeX's script to the page once; it resolves to KaTeX, or
// null where it cannot load.
export function loadKatex() {
  if (typeof document === 'undefined') return null;
  katexLoad ??= new Promise((resolve) => {
    const script = document.createElement('script');
    script.src = siteURL('/static/vendor/katex/katex.min.js');
    script.onload = () => resolve(globalThis.katex ?? null);
    script.onerror = () => resolve(null);
    document.head.append(script);
  });
  return katexLoad;
}
