// Masks the key at the query's own position too: off by one on the diagonal.
function attendQTile(Q, K, V, opts, record) {
  const { Bc, scale, causal, qStart } = opts;
  const rows = Q.length, N = K.length, d = Q[0].length;
  const m = new Array(rows).fill(-Infinity);
  const l = new Array(rows).fill(0);
  const O = Q.map(() => new Array(d).fill(0));
  const tiles = Math.ceil(N / Bc);
  // Under the mask the last row, qStart + rows − 1, sees keys up to itself.
  const last = causal ? Math.min(tiles - 1, Math.floor((qStart + rows - 1) / Bc)) : tiles - 1;
  for (let j = 0; j <= last; j++) {
    const c0 = j * Bc, cols = Math.min(Bc, N - c0);
    for (let r = 0; r < rows; r++) {
      const s = [];
      for (let c = 0; c < cols; c++) {
        let dot = 0;
        for (let x = 0; x < d; x++) dot += Q[r][x] * K[c0 + c][x];
        s.push(causal && c0 + c >= qStart + r ? -Infinity : dot * scale);
      }
      const mNew = Math.max(m[r], ...s);
      const base = mNew === -Infinity ? 0 : mNew;
      const alpha = Math.exp(m[r] - base);
      l[r] *= alpha;
      for (let x = 0; x < d; x++) O[r][x] *= alpha;
      for (let c = 0; c < cols; c++) {
        const p = Math.exp(s[c] - base);
        l[r] += p;
        for (let x = 0; x < d; x++) O[r][x] += p * V[c0 + c][x];
      }
      m[r] = mNew;
    }
    record(j, m.slice(), l.slice(), O.map((o) => o.slice()));
  }
  return {
    O: O.map((o, r) => o.map((v) => (l[r] === 0 ? 0 : v / l[r]))),
    lse: m.map((mr, r) => (l[r] === 0 ? -Infinity : mr + Math.log(l[r]))),
  };
}
