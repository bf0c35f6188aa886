// The side by side's memory figure: where a kernel keeps S and P (or, for
// the backward pair, P, dP and dS) at a step, device memory against the
// chip, to scale.
import { fmtBytes } from './format.js';
import { materialises } from './steps.js';
import { headBytes, runBytes, scoresShape, square } from './shape.js';

// largestBuffer is a pane's "largest buffer" line: what the run keeps in
// device memory beyond its inputs and outputs, over every batch-head (S
// and P are Nq×N for each query head: N×N in a square run).
export function largestBuffer(h, backward) {
  const b = runBytes(h);
  return backward
    ? (materialises(h.variant) ? `P, dP and dS: 3 × ${fmtBytes(b.s)} in device memory`
      : `none ${scoresShape(h)}: D (${fmtBytes(b.rows)}) beyond the inputs and gradients; S, P, dP and dS tiles: ${fmtBytes(4 * h.Br * h.Bc * 4)} on chip per block`)
    : materialises(h.variant)
      ? `S and P: ${fmtBytes(b.s)} + ${fmtBytes(b.p)} in device memory`
      : `none beyond Q, K, V, O; S and P tiles: ${fmtBytes(2 * h.Br * h.Bc * 4)} on chip per block`;
}

// squareLabels are the labels of the figure's S and P (or P, dP and dS)
// for one query head: name and bytes; none for a flash kernel.
export function squareLabels(h, backward) {
  if (!materialises(h.variant)) return [];
  const b = headBytes(h);
  return (backward ? ['P', 'dP', 'dS'] : ['S', 'P']).map((name) => ({ name, label: `${name} ${fmtBytes(name === 'P' ? b.p : b.s)}` }));
}

// drawMemory draws into canvas c where a kernel (trace header h) keeps S
// and P at a step (its tile states), to scale, for one query head: device
// memory holds Q and O (Nq×d), K and V (N×d) and, for naive, S and P
// (Nq×N: N×N squares in a square run), tile by tile as they are written;
// the chip holds one Br×Bc tile. The figure is always MEMORY_H tall, so
// the page keeps its place while the runs arrive; the squares shrink
// until they and their labels fit inside device memory's box, clear of the
// chip's. Rows of queries (Q, O, S, P) are drawn to the keys' scale, but
// never under 2 pixels.
const MEMORY_H = 156;

export function drawMemory(c, h, states, backward) {
  const W = Math.max(260, c.parentElement.clientWidth || 320);
  const H = MEMORY_H;
  const dpr = window.devicePixelRatio || 1;
  c.width = W * dpr; c.height = H * dpr;
  c.style.width = `${W}px`; c.style.height = `${H}px`;
  const g = c.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, W, H);
  g.font = '12px system-ui, sans-serif';
  g.textBaseline = 'top';
  const hbmW = W - 110;
  const naive = materialises(h.variant);
  const squares = squareLabels(h, backward);
  const words = backward ? ['no P, dP or dS here: only', 'Q, K, V, dO, O, L in; D, dQ, dK, dV'] : ['no S, no P here: only', 'Q, K, V in and O out'];
  const textW = (t) => g.measureText(t).width;
  // Where the strips and squares of a given side end, labels included.
  const layout = (side) => {
    const strip = Math.max(2, side * h.D / h.N);
    let x = 8 + 4 * (Math.max(strip, 10) + 4) + 6;
    const at = [];
    for (const sq of squares) {
      at.push(x);
      x += Math.max(side, textW(sq.label)) + 12;
    }
    const end = naive ? x - 12 : x + Math.max(...words.map(textW));
    return { strip, at, end };
  };
  let side = Math.max(40, Math.min(110, (W - 230) / (backward ? 3.6 : 2.4))); // the squares' N columns
  while (side > 16 && layout(side).end > hbmW - 6) side--;
  const { strip, at, end } = layout(side);
  // The query rows' height: side for a square run.
  const qSide = square(h) ? side : Math.max(2, side * h.Nq / h.N);
  c.dataset.contentRight = String(Math.ceil(end));
  c.dataset.chipLeft = String(hbmW + 8);
  // Device memory.
  g.strokeStyle = '#8a939e'; g.lineWidth = 1;
  g.strokeRect(0.5, 0.5, hbmW, H - 1);
  g.fillStyle = '#333';
  g.fillText('device memory (HBM)', 6, 4);
  const y0 = 24;
  let x = 8;
  for (const name of ['Q', 'K', 'V', 'O']) {
    const tall = name === 'K' || name === 'V' ? side : qSide; // N keys, Nq queries
    g.fillStyle = name === 'O' ? '#9bb7e0' : '#c8ced6';
    g.fillRect(x, y0, strip, tall);
    g.fillStyle = '#333';
    g.fillText(name, x, y0 + tall + 3);
    x += Math.max(strip, 10) + 4;
  }
  x += 6;
  if (naive) {
    // The forward's S fills as its tiles are written, P as its rows are
    // normalised; the backward's P was there before it began (the forward
    // stored it), dP fills as its tiles are written, dS as its rows are.
    const all = ['pending', 'stored', 'normalised', 'consumed', 'current', 'current-row'];
    const fills = backward
      ? { P: all, dP: ['stored', 'normalised', 'consumed', 'current'], dS: ['normalised', 'consumed'] }
      : { S: ['stored', 'normalised', 'consumed', 'current'], P: ['normalised', 'consumed'] };
    const colour = { S: '#e8a15c', P: '#9d6fcf', dP: '#e8a15c', dS: '#c05a8a' };
    squares.forEach(({ name, label }, n) => {
      x = at[n];
      g.fillStyle = '#fff';
      g.fillRect(x, y0, side, qSide);
      const tw = side * h.Bc / h.N, th = qSide * h.Br / h.Nq;
      g.fillStyle = colour[name];
      for (let i = 0; i < h.Tr; i++) {
        for (let j = 0; j < h.Tc; j++) {
          if (fills[name].includes(states[i * h.Tc + j])) g.fillRect(x + j * tw, y0 + i * th, Math.min(tw, side - j * tw), Math.min(th, qSide - i * th));
        }
      }
      g.strokeStyle = '#555';
      g.strokeRect(x + 0.5, y0 + 0.5, side, qSide);
      g.fillStyle = '#333';
      g.fillText(label, x, y0 + qSide + 3);
    });
  } else {
    g.fillStyle = '#555';
    g.fillText(words[0], x, y0 + side / 2 - 14);
    g.fillText(words[1], x, y0 + side / 2 + 2);
  }
  // On chip: one tile, at the same scale as the squares' columns.
  const cx = hbmW + 8;
  g.strokeStyle = '#0b5fff';
  g.strokeRect(cx + 0.5, 0.5, W - cx - 1, H - 1);
  g.fillStyle = '#0b5fff';
  g.fillText('on chip', cx + 6, 4);
  const tw = Math.max(2, side * h.Bc / h.N), th = Math.max(2, side * h.Br / h.N);
  g.fillStyle = naive ? '#e8a15c' : '#9bb7e0';
  g.fillRect(cx + 8, y0, Math.min(tw, W - cx - 16), th);
  g.fillStyle = '#333';
  g.fillText(`${h.Br}×${h.Bc} tile`, cx + 6, Math.min(H - 30, y0 + th + 4));
  g.fillText(fmtBytes(h.Br * h.Bc * 4), cx + 6, Math.min(H - 16, y0 + th + 18));
}
