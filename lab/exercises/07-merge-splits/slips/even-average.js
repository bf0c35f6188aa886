// Averages the partials evenly, as if every split held the same share.
function mergeSplits(lses, os) {
  const d = os[0].length;
  const M = Math.max(...lses);
  let sum = 0;
  for (const lse of lses) sum += Math.exp(lse - M);
  const o = new Array(d).fill(0);
  for (const os_ of os) for (let x = 0; x < d; x++) o[x] += os_[x] / os.length;
  return { lse: M + Math.log(sum), o };
}
