// The merge of one row's splits.
//
//   lses[s]     split s's log-sum-exp over its keys alone
//               (−Infinity: the row sees none of its keys)
//   os[s][x]    split s's partial output row, already divided by its own l
//
// Return { lse, o }: the whole row's log-sum-exp and its output row.
function mergeSplits(lses, os) {
  const d = os[0].length;
  const o = new Array(d).fill(0);
  // 1. the whole row's LSE, from the LSE_s
  // 2. each split's weight
  // 3. o = Σ weight · O_s
  return { lse: lses[0], o };
}
