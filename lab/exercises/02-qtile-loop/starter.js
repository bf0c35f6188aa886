// The loop of one block: q-tile Q against every kv-tile it must see.
//
//   Q[r][x]   the q-tile's rows: sequence rows qStart … qStart + Q.length − 1
//   K[c][x], V[c][x]   every key and value of the sequence (N rows)
//   opts      { Bc, scale, causal, qStart }: kv-tile size, 1/√d, the mask
//   record(j, m, l, O)   call after each kv-tile j you visit
//
// Return { O, lse }: O divided by l, row by row, and LSE = m + log l.
function attendQTile(Q, K, V, opts, record) {
  const { Bc, scale, causal, qStart } = opts;
  const rows = Q.length, N = K.length, d = Q[0].length;
  const m = new Array(rows).fill(-Infinity);
  const l = new Array(rows).fill(0);
  const O = Q.map(() => new Array(d).fill(0));
  // for each kv-tile j the block must see:
  //   scores S = Q K_jᵀ · scale, −Infinity where masked
  //   the online-softmax update of m, l and O
  //   record(j, m, l, O)
  return { O, lse: m.slice() };
}
