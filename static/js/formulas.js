// The formulas the stepper draws as its tables' column headings, each with
// its words for a screen reader (which reads no drawn formula). They are
// known before any page loads, so `make generate` typesets them
// (scripts/katex-typeset.mjs --heads writes formulas_gen.js) and a stepper
// draws them without loading KaTeX: its 270 KiB of script, parsed in every
// embedded frame of a lesson, cost the lesson its start.

// ROW_HEADS: the forward stepper's rows table (stepper_rows.js).
export const ROW_HEADS = {
  row: ['\\text{row}', 'row'],
  keys: ['\\text{keys met}', 'keys met'],
  mOld: ['m_{\\text{old}}', 'm old'],
  mNew: ['m_{\\text{new}}', 'm new'],
  alpha: ['\\alpha = e^{\\,m_{\\text{old}} - m_{\\text{new}}}', 'alpha, e to the m old minus m new'],
  l: ['l', 'l'],
  m: ['m', 'm'],
  lse: ['\\text{LSE} = m + \\log l', 'LSE, m plus log l'],
  mMax: ['m = \\max_c S', 'm, the largest score of the row'],
  lSum: ['l = \\textstyle\\sum_c e^{S - m}', 'l, the sum over the row of e to the S minus m'],
  mSoFar: ['m = \\max S \\text{ so far}', 'm, the largest score so far'],
  tileMax: ['\\max S \\text{ (this tile)}', 'the row\'s largest score in this tile'],
  sumP: ['\\textstyle\\sum p \\text{ (this tile)}', 'the sum of the row\'s p in this tile'],
  lseS: ['\\text{LSE}_s = m + \\log l', 'LSE s, the split\'s log-sum-exp, m plus log l'],
  lseRow: ['\\text{LSE} = \\log \\textstyle\\sum_s e^{\\text{LSE}_s}', 'LSE, the log of the sum over the splits of e to the LSE s'],
  w: ['w_s = e^{\\,\\text{LSE}_s - \\text{LSE}}', 'w s, e to the LSE s minus LSE'],
};

// BACKWARD_HEADS: the backward stepper's rows table (backward.js).
export const BACKWARD_HEADS = {
  row: ['\\text{row}', 'row'],
  l: ['L', 'L, the forward\'s log-sum-exp'],
  d: ['D = \\textstyle\\sum_x dO \\cdot O', 'D, the row sum of dO times O'],
  dNaive: ['D = \\textstyle\\sum_c P \\cdot dP', 'D, the row sum of P times dP'],
  sumP: ['\\textstyle\\sum p \\text{ (this tile)}', 'the sum of the row\'s p in this tile'],
  sumPSoFar: ['\\textstyle\\sum p \\text{ so far}', 'the sum of the row\'s p over the tiles so far'],
};
