// Takes the max of this tile's scores alone, forgetting the old one.
function onlineSoftmaxStep(mOld, lOld, oOld, S, V) {
  const m = [], l = [], O = [];
  for (let r = 0; r < S.length; r++) {
    const mNew = Math.max(...S[r]);
    const alpha = Math.exp(mOld[r] - mNew);
    let sum = 0;
    const o = oOld[r].map((v) => alpha * v);
    for (let c = 0; c < V.length; c++) {
      const p = Math.exp(S[r][c] - mNew);
      sum += p;
      for (let x = 0; x < o.length; x++) o[x] += p * V[c][x];
    }
    m.push(mNew);
    l.push(alpha * lOld[r] + sum);
    O.push(o);
  }
  return { m, l, O };
}
