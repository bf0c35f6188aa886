// What each kind of step does, in words: the stepper's and the comparison's
// titles and explanations.

const rowsOf = (h, i) => `rows ${i * h.Br}–${Math.min(h.N, (i + 1) * h.Br) - 1}`;
const colsOf = (h, j) => `cols ${j * h.Bc}–${Math.min(h.N, (j + 1) * h.Bc) - 1}`;

export function describe(h, r) {
  const head = `b${Math.floor(r.bh / h.heads)} h${r.bh % h.heads}`;
  if (h.variant === 'naive_row') {
    if (r.kind === 'scores') {
      return [`Pass 1: rows ${rowsOf(h, r.i).slice(5)} × keys ${colsOf(h, r.j).slice(5)}, ${head}`,
        `Each thread owns one query row and walks these keys: s = q·k/√d for each, keeping the row's running max m. Nothing is stored; pass 2 computes every score again.` +
        (r.j === 0 ? ' First keys: each thread loads its q row into registers.' : '')];
    }
    if (r.kind === 'flash_step') {
      return [`Pass 2: rows ${rowsOf(h, r.i).slice(5)} × keys ${colsOf(h, r.j).slice(5)}, ${head}`,
        'The row max m is known from pass 1, so m never changes here and α = 1: each thread recomputes s, adds P = exp(s − m) to l and P·v to its row of O. No rescaling, at the price of reading all of K twice.'];
    }
  }
  if (h.variant === 'flash1' && r.kind === 'flash_step') {
    return [`kv-tile ${r.j} (${colsOf(h, r.j)}) × q-tile ${r.i} (${rowsOf(h, r.i)}), ${head}`,
      `FlashAttention-1's order: K${sub(r.j)} and V${sub(r.j)} stay in shared memory while the block walks the q-tiles. For this one it reads Q${sub(r.i)}` +
      (r.j > 0 ? ` and its running O${sub(r.i)}, m and l back from device memory` : ' (its O, m and l start empty)') +
      `, computes S, the new max, α and P, and writes O${sub(r.i)} = (α·l_old·O_old + P·V${sub(r.j)}) / l_new, m and l to device memory again.`];
  }
  if (h.variant === 'flash1' && r.kind === 'epilogue') {
    return [`Q-tile ${r.i} finished (${rowsOf(h, r.i)}), ${head}`,
      `That was q-tile ${r.i}'s last kv-tile: its O in device memory, normalised at every step, is final. The block writes LSE = m + log l.`];
  }
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
// others keep them on chip (the flash loops, and naive_row, whose scores
// live one at a time in a thread's registers).
export const materialises = (variant) => variant === 'naive' || variant === 'naive_mma';

const SUB = '₀₁₂₃₄₅₆₇₈₉';
export const sub = (n) => String(n).split('').map((c) => SUB[+c]).join('');

