// What a lesson's reader has been taught. A lesson's widget opens the
// stepper with taught=N, N the lesson's order in the course (1–15); the
// stepper then shows no idea a later lesson teaches as if it were known,
// and says in its place where it is explained. Without taught= everything
// is known, as on the stepper's own page.
//
// The one table: each idea the stepper's views show, and the lesson of
// lessons/course/ that teaches it. Everything else (Q, K, V, the scores S,
// the weights P, the output O, batch-heads) is lesson 1's.
export const TAUGHT_IN = {
  // 02-memory: device memory against on-chip memory; the bytes each step moves.
  memory: 2,
  // 03-naive: naive attention's three phases, S and P stored in device memory.
  naive: 3,
  // 04-tiling: q-tiles of Br rows, kv-tiles of Bc rows, one block per q-tile,
  // the padding of ragged tiles.
  tiles: 4,
  // 05-online-softmax: the row max subtracted first, the running max m, the
  // running sum l, the rescale α = exp(m_old − m_new), P and O left
  // undivided until the end, LSE = m + log l; naive_row's two passes.
  online: 5,
  // 07-causal: the causal mask, masked scores of −∞, tiles skipped whole.
  causal: 7,
  // 08-gpu: SMs, the grid of blocks, the timeline, FlashAttention-1's order.
  gpu: 8,
  // 09-registers: registers and spills, as ptxas reports them.
  registers: 9,
  // 12-hopper: warp roles (a producer warpgroup's copies, two consumers'
  // products and softmax), the lanes of a roles trace.
  roles: 12,
};

// taughtUpTo reads taught=N from a URL's query: the last lesson read, or
// Infinity (everything) when the URL names none or no lesson.
export function taughtUpTo(search) {
  const n = Number(new URLSearchParams(search).get('taught'));
  return Number.isInteger(n) && n >= 1 && n <= 15 ? n : Infinity;
}

// Knowledge answers, for the lessons read so far, whether an idea is known
// and, if not, which lesson explains it.
export class Knowledge {
  constructor(upTo = Infinity) { this.upTo = upTo; }

  knows(idea) { return (TAUGHT_IN[idea] ?? 1) <= this.upTo; }

  // lesson is where an idea is explained: "lesson 5".
  lesson(idea) { return `lesson ${TAUGHT_IN[idea]}`; }
}

export const everything = new Knowledge();
