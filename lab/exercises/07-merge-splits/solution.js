// The merge of one row's splits.
function mergeSplits(lses, os) {
  const d = os[0].length;
  const o = new Array(d).fill(0);
  // Against the largest LSE_s, every exponent is at most 0: no overflow.
  const M = Math.max(...lses);
  if (M === -Infinity) return { lse: -Infinity, o }; // no split saw a key
  let sum = 0;
  for (const lse of lses) sum += Math.exp(lse - M);
  const lse = M + Math.log(sum);
  lses.forEach((ls, s) => {
    const w = Math.exp(ls - lse); // split s's share; the w sum to 1
    for (let x = 0; x < d; x++) o[x] += w * os[s][x];
  });
  return { lse, o };
}
