// The arithmetic of a roles trace's lanes (docs/ROLES.md), as package
// roles does it in Go: a block's role records as spans in ns from its
// first stamp, their unions and overlaps, the tracks that keep spans that
// overlap in time apart, and the note that sums a step's spans in words.
// Nothing here touches the page: Node's tests hold it to package roles.
import { sub } from './steps.js';

// LANE_OF_ROLE names the lane of each warp role.
export const LANE_OF_ROLE = { producer: 'producer', consumer0: 'consumer 0', consumer1: 'consumer 1' };

// isProduct: a tensor-core product, issued to waited for (roles.IsProduct).
export const isProduct = (e) => e === 'product_s' || e === 'product_pv';

// Words for an event of kv-tile j (closing-group spans have j = −1).
export function eventWords(e, j) {
  const t = j >= 0 ? sub(j) : '';
  switch (e) {
    case 'copy_q': return 'copy of Q (TMA: issued → landed)';
    case 'copy_k': return `copy of K${t} (TMA: issued → landed)`;
    case 'copy_v': return `copy of V${t} (TMA: issued → landed)`;
    case 'free_k': return `wait for a free stage for K${t}`;
    case 'free_v': return `wait for a free stage for V${t}`;
    case 'wait_q': return 'wait for Q to land';
    case 'wait_k': return `wait for K${t} to land`;
    case 'wait_v': return `wait for V${t} to land`;
    case 'turn_s': return `wait for the turn to issue S = QK${t}ᵀ`;
    case 'turn_pv': return `wait for the turn to issue P·V${t}`;
    case 'product_s': return `product S = QK${t}ᵀ (issued → waited for)`;
    case 'product_pv': return `product P·V${t} (issued → waited for)`;
    case 'softmax': return 'online softmax';
    case 'epilogue': return 'epilogue (O / l, written out)';
    default: return e;
  }
}

// union is the union of intervals {s, e, ...} as disjoint intervals in
// time order, each with the intervals it joins (parts).
export function union(spans) {
  const iv = spans.filter((x) => x.e > x.s).sort((a, b) => a.s - b.s);
  const out = [];
  for (const x of iv) {
    const last = out.at(-1);
    if (last && x.s <= last.e) {
      last.e = Math.max(last.e, x.e);
      last.parts.push(x);
    } else out.push({ s: x.s, e: x.e, parts: [x] });
  }
  return out;
}

// overlap is how much of [s, e) the disjoint intervals cover.
export function overlap(s, e, iv) {
  let n = 0;
  for (const x of iv) {
    const lo = Math.max(s, x.s), hi = Math.min(e, x.e);
    if (hi > lo) n += hi - lo;
  }
  return n;
}

// total is the length of disjoint intervals.
export const total = (iv) => iv.reduce((n, x) => n + x.e - x.s, 0);

// pack puts spans that overlap in time on separate tracks of their lane,
// each on the first track free at its start; a lane's groups of spans
// (the producer's copies, then its waits for a free stage) take tracks of
// their own, in that order.
export function pack(spans, groupOf = () => 0) {
  let used = 0;
  const groups = [...new Set(spans.map(groupOf))].sort((a, b) => a - b);
  for (const grp of groups) {
    const ends = [];
    for (const x of spans.filter((y) => groupOf(y) === grp).sort((a, b) => a.s - b.s || a.order - b.order)) {
      let t = ends.findIndex((end) => end <= x.s);
      if (t < 0) { t = ends.length; ends.push(0); }
      ends[t] = Math.max(x.s, x.e);
      x.track = used + t;
    }
    used += ends.length;
  }
  return Math.max(1, used);
}

// isFreeWait: the producer's wait for a free stage.
export const isFreeWait = (x) => x.event === 'free_k' || x.event === 'free_v';

// ns writes a time in whole ns.
export const ns = (v) => `${Math.round(v)} ns`;

// blockOf reads a block's role records into spans, in ns from the block's
// first stamp (its clock anchors, instants, left out, as roles.Extent
// does), the product union and what each span's kv-tile is for the
// stepper: its own, or for the closing group's copy of Q and waits for it
// the block's first kv-tile (they come before it), else the epilogue (−1).
export function blockOf(m, key) {
  const recs = m.roles.get(key);
  if (!recs?.length) return null;
  const work = recs.filter((r) => r.event !== 'clock');
  if (!work.length) return null;
  let t0 = null, t1 = null;
  for (const r of work) {
    if (t0 === null || r.tStart < t0) t0 = r.tStart;
    if (t1 === null || r.tEnd > t1) t1 = r.tEnd;
  }
  const firstStep = m.steps[m.blockStart.get(key)];
  const firstJ = firstStep && firstStep.j >= 0 ? firstStep.j : -1;
  const spans = work.map((r, order) => ({
    r, order, lane: LANE_OF_ROLE[r.role], event: r.event, j: r.j,
    tile: r.j >= 0 ? r.j : (r.event === 'copy_q' || r.event === 'wait_q') ? firstJ : -1,
    s: Number(r.tStart - t0), e: Number(r.tEnd - t0),
  }));
  const products = union(spans.filter((x) => x.lane !== 'producer' && isProduct(x.event)));
  return { key, t0, length: Number(t1 - t0), spans, products, sm: recs[0].sm, firstJ };
}

// stepNote sums the spans of block b's step at kv-tile j (−1: the
// epilogue) in a sentence or two, every figure read from the records:
// what each role did for the step's kv-tile (or, at the epilogue, for the
// closing group), and how much of the block had a product in flight. With
// hold, the softmax's overlap is kept back (a lesson's checkpoint asks it).
export function stepNote(b, j, hold = false) {
  const find = (lane, event, tile) => b.spans.find((x) => x.lane === lane && x.event === event && x.j === tile);
  const len = (x) => x.e - x.s;
  const parts = [];
  const other = { 'consumer 0': 'consumer 1', 'consumer 1': 'consumer 0' };
  const productsOf = (lane) => union(b.spans.filter((x) => x.lane === lane && isProduct(x.event)));
  if (j >= 0) {
    const t = sub(j);
    const copies = [];
    if (j === b.firstJ) {
      // Q is copied once, before the block's first kv-tile.
      const cq = find('producer', 'copy_q', -1);
      const wq = ['consumer 0', 'consumer 1'].map((lane) => [lane, find(lane, 'wait_q', -1)]).filter(([, x]) => x);
      if (cq) copies.push(`Q landed ${ns(len(cq))} after its issue` + (wq.length ? ` (${wq.map(([lane, x]) => `${lane} waited ${ns(len(x))} for it`).join(', ')})` : ''));
    }
    for (const [name, copy, free] of [['K', 'copy_k', 'free_k'], ['V', 'copy_v', 'free_v']]) {
      const cp = find('producer', copy, j), fr = find('producer', free, j);
      if (!cp) continue;
      copies.push(`${name}${t} landed ${ns(len(cp))} after its issue` + (fr ? `, issued after ${ns(len(fr))} waiting for a free stage` : ''));
    }
    if (copies.length) parts.push(`producer: ${copies.join('; ')}`);
    for (const lane of ['consumer 0', 'consumer 1']) {
      const bits = [];
      const wk = find(lane, 'wait_k', j), ts = find(lane, 'turn_s', j), ps = find(lane, 'product_s', j), sm = find(lane, 'softmax', j);
      const wv = find(lane, 'wait_v', j), tp = find(lane, 'turn_pv', j), pv = find(lane, 'product_pv', j);
      if (wk) bits.push(`waited ${ns(len(wk))} for K${t}`);
      if (ts) bits.push(`${ns(len(ts))} for its turn`);
      if (ps) bits.push(`S ${ns(len(ps))}`);
      if (sm) bits.push(`softmax ${ns(len(sm))}, of which ${hold ? '? (a checkpoint asks)' : ns(overlap(sm.s, sm.e, productsOf(other[lane])))} under ${other[lane]}'s products`);
      if (wv) bits.push(`waited ${ns(len(wv))} for V${t}`);
      if (tp) bits.push(`${ns(len(tp))} for its turn`);
      if (pv) bits.push(`P·V ${ns(len(pv))}`);
      if (bits.length) parts.push(`${lane}: ${bits.join(', ')}`);
    }
  } else {
    const eps = ['consumer 0', 'consumer 1'].map((lane) => [lane, find(lane, 'epilogue', -1)]).filter(([, x]) => x);
    if (eps.length) parts.push(`it took ${eps.map(([lane, x]) => `${lane} ${ns(len(x))}`).join(', ')}`);
  }
  const head = j >= 0 ? `kv-tile ${j}: ` : 'The epilogue: ';
  const body = parts.length ? parts.join('; ') + '.' : 'no role records for this step.';
  const inFlight = total(b.products);
  const share = b.length > 0 ? Math.round(100 * inFlight / b.length) : 0;
  return `${head}${body} Over the block, a product was in flight ${share}% of its ${(b.length / 1000).toFixed(1)} µs ` +
    '(issued and not yet waited for, queueing included: not the tensor cores\' busy cycles). ' +
    'Outlined: this step\'s spans; the dashed rule: its start. Click a span to go to its step.';
}
