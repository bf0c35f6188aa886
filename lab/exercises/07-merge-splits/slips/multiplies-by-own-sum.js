// Treats O_s as not yet divided by its l and multiplies it back by its sum
// against M, exp(LSE_s − M), before weighing it.
function mergeSplits(lses, os) {
  const d = os[0].length;
  const M = Math.max(...lses);
  let sum = 0;
  for (const lse of lses) sum += Math.exp(lse - M);
  const lse = M + Math.log(sum);
  const o = new Array(d).fill(0);
  lses.forEach((ls, s) => {
    const w = Math.exp(ls - lse);
    for (let x = 0; x < d; x++) o[x] += w * Math.exp(ls - M) * os[s][x];
  });
  return { lse, o };
}
