// Weighs split s by exp(LSE_s), its own sum, never divided by the row's.
function mergeSplits(lses, os) {
  const d = os[0].length;
  const M = Math.max(...lses);
  let sum = 0;
  for (const lse of lses) sum += Math.exp(lse - M);
  const o = new Array(d).fill(0);
  lses.forEach((ls, s) => {
    const w = Math.exp(ls);
    for (let x = 0; x < d; x++) o[x] += w * os[s][x];
  });
  return { lse: M + Math.log(sum), o };
}
