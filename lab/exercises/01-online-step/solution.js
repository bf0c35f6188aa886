// One kv-tile of the online softmax, for every row r of the q-tile.
function onlineSoftmaxStep(mOld, lOld, oOld, S, V) {
  const rows = S.length, cols = V.length, d = V[0].length;
  const m = [], l = [], O = [];
  for (let r = 0; r < rows; r++) {
    const mNew = Math.max(mOld[r], ...S[r]);
    // exp(−∞ − m) is 0 for any finite m: the first tile's α needs no case
    // of its own. A row whose scores are all −∞ so far keeps m = −∞;
    // measure against 0 then, so that no −∞ − (−∞) makes a NaN.
    const base = mNew === -Infinity ? 0 : mNew;
    const alpha = Math.exp(mOld[r] - base);
    let sum = 0;
    const o = oOld[r].map((v) => alpha * v);
    for (let c = 0; c < cols; c++) {
      const p = Math.exp(S[r][c] - base);
      sum += p;
      for (let x = 0; x < d; x++) o[x] += p * V[c][x];
    }
    m.push(mNew);
    l.push(alpha * lOld[r] + sum);
    O.push(o);
  }
  return { m, l, O };
}
