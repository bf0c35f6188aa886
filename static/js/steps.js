// What each kind of step does, in words: the stepper's and the comparison's
// titles and explanations. A lesson's reader may not know every idea yet
// (taught.js): then a step is told in the words the lessons read so far
// use, and says where the rest is explained.
import { everything } from './taught.js';
import { rung } from './rungs.js';
import { firstQTile, keysRange, rowsRange, scoresShape } from './shape.js';
import { keysWords, splitLayout, splitOfTile, startsSplit } from './splits.js';

// A q-tile's rows are query rows (of Nq), a kv-tile's columns keys (of N).
const rowsOf = (h, i) => `rows ${rowsRange(h, i)}`;
const colsOf = (h, j) => `cols ${keysRange(h, j)}`;
const keysOf = (h, j) => `keys ${keysRange(h, j)}`;
const cap = (s) => s[0].toUpperCase() + s.slice(1);

// batchHead names a batch-head in words: "batch 1, head 7"; in a run with
// grouped heads also the head of K and V it reads, "batch 1, head 7, K/V
// head 1" (heads/kvHeads query heads in a row share one).
export const batchHead = (h, bh) => `batch ${Math.floor(bh / h.heads)}, head ${bh % h.heads}` +
  (h.kvHeads && h.kvHeads !== h.heads ? `, K/V head ${Math.floor((bh % h.heads) / (h.heads / h.kvHeads))}` : '');

// batchHeadShort is the same in the few characters a select box has:
// "b1 h7" (the box's title says what b and h are).
export const batchHeadShort = (h, bh) => `b${Math.floor(bh / h.heads)} h${bh % h.heads}`;

// fill puts a step's figures into a rung's own words (kernels.StepWords
// says which names it may use).
export function fill(text, h, r, head = batchHead(h, r.bh)) {
  const names = {
    i: r.i, j: r.j, head,
    rows: rowsOf(h, r.i).slice(5), keys: colsOf(h, r.j).slice(5),
    Q_i: `Q${sub(r.i)}`, K_j: `K${sub(r.j)}`, V_j: `V${sub(r.j)}`, O_i: `O${sub(r.i)}`,
    dO_i: `dO${sub(r.i)}`, L_i: `L${sub(r.i)}`, D_i: `D${sub(r.i)}`, dQ_i: `dQ${sub(r.i)}`, dK_j: `dK${sub(r.j)}`, dV_j: `dV${sub(r.j)}`,
  };
  return (text ?? '').replace(/\{(\w+)\}/g, (all, name) => (name in names ? String(names[name]) : all));
}

// describe tells step r of a trace (whose model m, where given, says what
// a split-KV trace's records do not: the kv-tiles each split walked, the
// split a timing record closes).
export function describe(h, r, know = everything, m = null) {
  const head = batchHead(h, r.bh);
  if (!know.knows('online') && (r.kind === 'flash_step' || r.kind === 'epilogue') && !materialises(h.variant)) {
    return untaughtFlash(h, r, head, know);
  }
  const layout = splitLayout(h, m);
  if (layout && !rung(h.variant)?.steps?.[r.kind]) {
    const said = describeSplit(h, r, head, layout, m);
    if (said) return said;
  }
  const own = rung(h.variant)?.steps?.[r.kind];
  if (own) {
    // A backward block's first step is its first q-tile's, not kv-tile 0's
    // (the naive backward's visits every q-tile from 0).
    const first = r.kind === 'bwd_step' ? r.i === firstQTile(h, r.j) : r.kind === 'bwd_kv' ? r.i === 0 : r.j === 0;
    const body = own.body + ((first ? own.first : own.later) ?? '');
    return [fill(own.title, h, r, head), fill(body, h, r, head)];
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
      return [know.knows('tiles') ? `Naive phase 1: S tile (${r.i}, ${r.j}), ${head}` : `Naive phase 1: scores of ${rowsOf(h, r.i)} × ${keysOf(h, r.j)}, ${head}`,
        (know.knows('tiles') ? `S = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d` : 'These scores S = QKᵀ/√d are') + ` written to an ${scoresShape(h)} buffer in device memory` +
        (!h.causal ? '.' : know.knows('causal') ? ' (−∞ above the diagonal: naive computes every tile).' : ', every one of them (the causal mask, −∞ above the diagonal, is lesson 7).')];
    case 'softmax':
      return [`Naive phase 2: softmax of ${rowsOf(h, r.i)}, ${head}`,
        know.knows('online')
          ? `Each row of S is read back from device memory three times: for its max m, for l = Σ exp(S − m), and to write P = exp(S − m)/l, a second ${scoresShape(h)} buffer.`
          : `Each row of S is read back from device memory three times: for its largest score, for the sum of its exponentials, and to write the weights P, a second ${scoresShape(h)} buffer. Why the largest score comes first: ${know.lesson('online')}.`];
    case 'pv':
      return [know.knows('tiles') ? `Naive phase 3: O += P tile (${r.i}, ${r.j}) · V${sub(r.j)}, ${head}` : `Naive phase 3: O += P of ${rowsOf(h, r.i)} × ${keysOf(h, r.j)}, times their V, ${head}`,
        know.knows('tiles') ? `The P tile is read back from device memory with V${sub(r.j)} and added into O.` : 'These weights P are read back from device memory with the values V of their keys and added into O.'];
    case 'timing': {
      const us = Number(r.tEnd - r.tStart) / 1000;
      if (!know.knows('gpu')) {
        return [`Q-tile ${r.i}, ${head}: ${r.j >= 0 ? `kv-tile ${r.j}` : 'the end'}`,
          `This step took ${us.toFixed(2)} µs. Which part of the GPU ran it, and when: ${know.lesson('gpu')}.`];
      }
      const title = `Block of q-tile ${r.i}, ${head}: ${r.j >= 0 ? `kv-tile ${r.j}` : 'epilogue'}, on SM ${r.sm}`;
      if (h.roles) {
        // A roles trace's step is consumer 0's own: its stamps at the
        // step's start and end; the warp roles' spans are drawn apart.
        return [title, `This step took ${us.toFixed(2)} µs on SM ${r.sm}, from consumer 0's stamps at its start and its end. ` +
          (know.knows('roles') ? 'A roles trace records no arrays: beside each step it stamps when each warp role of the block copied, waited, multiplied and ran the softmax, drawn in the lanes under the timeline.'
            : `A roles trace records no arrays; what else it stamps: ${know.lesson('roles')}.`)];
      }
      return [title,
        `This step took ${us.toFixed(2)} µs on SM ${r.sm}. A timing trace stamps the SM and the start and end of every step of every block and records no arrays, so the kernel runs close to its untraced speed, though not at it (the traced build differs: on the H100 the Hopper rungs ran 1.1–1.4× slower so stamped).`];
    }
  }
  return [r.kind, ''];
}

// describeSplit tells the steps of a split-KV trace (splits.js) that the
// shared words would tell wrong: a split's end, a merge, a flash step (its
// split, and at its first kv-tile the fresh state), the epilogue (nothing
// left to divide) and a timing record that closes a split or a merge; null
// for the rest.
function describeSplit(h, r, head, layout, m) {
  const at = `q-tile ${r.i}, ${head}`;
  const S = layout.splits;
  const timing = r.kind === 'timing' ? m?.timingSplit.get(r) : null;
  if (timing) {
    const us = (Number(r.tEnd - r.tStart) / 1000).toFixed(2);
    return timing.kind === 'split_end'
      ? [`Split ${timing.s} ends (${keysWords(h, layout, timing.s)}), ${at}, on SM ${r.sm}`, `The split's block wrote its partial O${sub(timing.s)} and LSE${sub(timing.s)}; this step took ${us} µs on SM ${r.sm}.`]
      : [`Merge adds split ${timing.s}, ${at}, on SM ${r.sm}`, `The merge kernel added w${sub(timing.s)}·O${sub(timing.s)} to O; this step took ${us} µs on SM ${r.sm}.`];
  }
  const split = r.j;
  const O = `O${sub(split)}`, L = `LSE${sub(split)}`;
  switch (r.kind) {
    case 'split_end': {
      const walked = m ? (m.splitSteps.get(`${r.bh},${r.i}`)?.[split] ?? []).map((k) => m.steps[k].j) : null;
      const own = layout.ranges[split];
      let walk = 'walked its kv-tiles from a fresh m = −∞, l = 0 and O = 0';
      if (walked && walked.length === 0) walk = 'walked none of its kv-tiles: every one of its keys lies after the rows\' positions (the causal mask)';
      else if (walked && own && walked.length < own[1] - own[0]) walk = `walked kv-tiles ${walked[0]}–${walked.at(-1)} of its ${own[0]}–${own[1] - 1} from a fresh m = −∞, l = 0 and O = 0 (the causal mask ends the walk at the rows' positions)`;
      else if (walked && walked.length) walk = `walked kv-tile${walked.length > 1 ? `s ${walked[0]}–${walked.at(-1)}` : ` ${walked[0]}`} from a fresh m = −∞, l = 0 and O = 0`;
      const none = walked && walked.length === 0;
      return [`Split ${split} ends: its partial ${O} and ${L} over ${keysWords(h, layout, split)}, ${at}`,
        `Split ${split}'s block ${walk}. It writes its partial to device memory in float32: ` +
        (none ? `${O} = 0 and ${L} = −∞, which weighs nothing in the merge.`
          : `${O} = O/l, divided by its own l, and ${L} = m + log l, the log-sum-exp of its keys alone.`) +
        ` The ${S} splits run as separate blocks, none knowing the others' max or sum: the merge kernel weighs them afterwards.`];
    }
    case 'merge':
      return [`Merge adds split ${split}: weight w = exp(${L} − LSE), ${at}`,
        `The merge kernel reads every split's ${'LSE'}ₛ for each row's LSE = log Σₛ exp(LSEₛ), the log-sum-exp over all N keys, then adds w·${O} to O with w = exp(${L} − LSE), split ${split}'s share of the row's softmax weight. ` +
        'The online softmax\'s rescale again, across blocks: α = exp(m_old − m_new) re-weighs a sum made under an older max; w re-weighs a partial normalised by its own sum to the whole row. ' +
        (split === S - 1 ? 'This is the last split: O is final, and each row\'s weights sum to 1.' : split === 0 ? `The first split: O = w·${O}.` : `O now holds splits 0–${split}.`)];
    case 'flash_step': {
      // The rule's split of the kv-tile; a trace of another rung, the
      // split its model filed the step under.
      const k = layout.per || !m ? -1 : m.steps.indexOf(r);
      const s = layout.per || !m ? splitOfTile(layout, r.j) : (m.stepSplit.get(k) ?? -1);
      if (s < 0) return null;
      const first = k >= 0 ? startsSplit(m, k) : layout.ranges[s]?.[0] === r.j;
      return [`Q-tile ${r.i} (${rowsOf(h, r.i)}) × kv-tile ${r.j} (${colsOf(h, r.j)}), split ${s}, ${head}`,
        `On chip: S = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d, the new row max m, the rescale α = exp(m_old − m_new) applied to l and O, then P = exp(S − m_new) added to l and P·V${sub(r.j)} to O.` +
        (first ? ` Split ${s}'s first kv-tile: its block starts from m = −∞, l = 0 and O = 0` +
          (s > 0 ? `, not from the state after kv-tile ${r.j - 1} (split ${s - 1}'s block walked that one), and loads Q${sub(r.i)} itself.` : ` and loads Q${sub(r.i)}.`)
          : ` The running m, l and O are split ${s}'s alone.`)];
    }
    case 'epilogue':
      return [`Q-tile ${r.i} finished (${rowsOf(h, r.i)}), ${head}`,
        `The merge kernel writes O${sub(r.i)} = Σₛ wₛ·Oₛ over the ${S} splits, and each row's LSE, to device memory. Nothing is left to divide: each Oₛ was divided by its own l, and the weights sum to 1.`];
  }
  return null;
}

// untaughtFlash tells a flash loop's step to a reader who has not met the
// online softmax yet (lesson 5), nor perhaps tiles (lesson 4) or device
// memory (lesson 2): what is computed, in lesson 1's terms.
function untaughtFlash(h, r, head, know) {
  const rows = rowsOf(h, r.i);
  const where = know.knows('memory') ? ' and written to device memory' : '';
  if (r.kind === 'epilogue') {
    return [know.knows('tiles') ? `Q-tile ${r.i} finished (${rows}), ${head}` : `${cap(rows)} finished, ${head}`,
      `These rows have met every key: each output row is divided by the sum of its row's weights once${where}. Why the division waits for the end: ${know.lesson('online')}.`];
  }
  const title = know.knows('tiles')
    ? `Q-tile ${r.i} (${rows}) × kv-tile ${r.j} (${colsOf(h, r.j)}), ${head}`
    : `${cap(rows)} × ${keysOf(h, r.j)}, ${head}`;
  const what = know.knows('tiles') ? `S = Q${sub(r.i)}K${sub(r.j)}ᵀ/√d` : 'The scores S = QKᵀ/√d of these rows against these keys';
  return [title, `${what}, then their weights P and their part of the output O${know.knows('memory') ? ', all on chip' : ''}. ` +
    `How each row's weights still come out right when its keys arrive a few at a time: ${know.lesson('online')}.`];
}

// firstQTile is the first q-tile a backward's kv-tile j block visits:
// under a causal mask the one holding the row at position j·Bc (those
// above see none of its keys; kernels.bwdFirstQTile). shape.js has it.
export { firstQTile };

// materialises: a naive kernel, whose S and P go through device memory; the
// others keep them on chip (the flash loops, and naive_row, whose scores
// live one at a time in a thread's registers).
export const materialises = (variant) => Boolean(rung(variant)?.materialised);

const SUB = '₀₁₂₃₄₅₆₇₈₉';
export const sub = (n) => String(n).split('').map((c) => SUB[+c]).join('');

