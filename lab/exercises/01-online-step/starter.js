// One kv-tile of the online softmax, for every row r of the q-tile.
//
//   mOld[r]      the row's largest score before this tile (−Infinity at first)
//   lOld[r]      Σ exp(s − mOld[r]) over the scores before this tile (0 at first)
//   oOld[r][x]   Σ exp(s − mOld[r]) · v[x] over those keys: not divided by l
//   S[r][c]      this tile's scores, already × 1/√d (−Infinity: masked)
//   V[c][x]      this tile's value rows
//
// Return { m, l, O }: the same three after this tile.
function onlineSoftmaxStep(mOld, lOld, oOld, S, V) {
  const rows = S.length, cols = V.length, d = V[0].length;
  const m = [], l = [], O = [];
  for (let r = 0; r < rows; r++) {
    // 1. the new running max
    // 2. the weights of this tile's scores, and the rescale of the old ones
    // 3. the new l and O
    m.push(mOld[r]);
    l.push(lOld[r]);
    O.push(oOld[r].slice());
  }
  return { m, l, O };
}
