// What each kind of step does, in words: the stepper's and the comparison's
// titles and explanations.

const rowsOf = (h, i) => `rows ${i * h.Br}–${Math.min(h.N, (i + 1) * h.Br) - 1}`;
const colsOf = (h, j) => `cols ${j * h.Bc}–${Math.min(h.N, (j + 1) * h.Bc) - 1}`;

export function describe(h, r) {
  const head = `b${Math.floor(r.bh / h.heads)} h${r.bh % h.heads}`;
  switch (r.kind) {
    case 'flash_step':
      return [`Q-tile ${r.i} (${rowsOf(h, r.i)}) × kv-tile ${r.j} (${colsOf(h, r.j)}), ${head}`,
        `On chip: S = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d, the new row max m, the rescale α = exp(m_old − m_new) applied to l and O, then P = exp(S − m_new) added to l and P·V${sub(r.j)} to O.` +
        (r.j === 0 ? ` First kv-tile: Q${sub(r.i)} is loaded from device memory once and stays on chip.` : '')];
    case 'epilogue':
      return [`Q-tile ${r.i} finished (${rowsOf(h, r.i)}), ${head}`,
        !materialises(h.variant)
          ? 'After the last kv-tile the block divides O by l once, and writes the output rows and LSE = m + log l to device memory.'
          : 'O = P·V is complete; the output rows are written to device memory.'];
    case 'scores':
      return [`Naive phase 1: S tile (${r.i}, ${r.j}), ${head}`,
        `S = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d is written to an N×N buffer in device memory${h.causal ? ' (−∞ above the diagonal: naive computes every tile)' : ''}.`];
    case 'softmax':
      return [`Naive phase 2: softmax of ${rowsOf(h, r.i)}, ${head}`,
        'Each row of S is read back from device memory three times: for its max m, for l = Σ exp(S − m), and to write P = exp(S − m)/l, a second N×N buffer.'];
    case 'pv':
      return [`Naive phase 3: O += P tile (${r.i}, ${r.j}) · V${sub(r.j)}, ${head}`,
        `The P tile is read back from device memory with V${sub(r.j)} and added into O.`];
    case 'timing': {
      const us = Number(r.tEnd - r.tStart) / 1000;
      return [`Block of q-tile ${r.i}, ${head}: ${r.j >= 0 ? `kv-tile ${r.j}` : 'epilogue'}, on SM ${r.sm}`,
        `This step took ${us.toFixed(2)} µs on SM ${r.sm}. A timing trace stamps the SM and the start and end of every step of every block and records no arrays, so the kernel runs at full speed.`];
    }
  }
  return [r.kind, ''];
}

// materialises: a naive kernel, whose S and P go through device memory; the
// others are flash loops (float32 or tensor cores).
export const materialises = (variant) => variant.startsWith('naive');

const SUB = '₀₁₂₃₄₅₆₇₈₉';
export const sub = (n) => String(n).split('').map((c) => SUB[+c]).join('');

