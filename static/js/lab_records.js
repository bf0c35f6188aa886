// A kernel's records stepped beside the reference kernel's: a student's
// verdict, or the solution's recorded one, each kv-tile of each q-tile
// beside the reference kernel's state after the same step, and the first
// difference shown as two heatmaps of O and a table of m and l.
import { Heatmap } from './heatmap.js';
import { fmt } from './format.js';
import { siteURL } from './site.js';
import { page, $ } from './lab_page.js';

// showMiss shows a miss (or the step picked) of rows from rowStart: the
// student's O beside the kernel's, and each row's m and l, the row that
// missed marked.
const views = { yours: null, kernel: null };
export function showMiss(rowStart, miss, who = 'your') {
  const box = $('lab-diff');
  $('lab-diff-yours').textContent = who === 'your' ? 'Yours' : "The recorded solution's";
  if (!miss.state || !miss.kernel) { box.hidden = true; return; }
  box.hidden = false;
  views.yours ??= new Heatmap($('lab-o-yours'), { fit: true });
  views.kernel ??= new Heatmap($('lab-o-kernel'), { fit: true });
  const rows = miss.kernel.O.length, d = miss.kernel.O[0].length;
  const flat = (O) => Float32Array.from({ length: rows * d }, (_, e) => Number(O?.[Math.floor(e / d)]?.[e % d]));
  const max = Math.max(...flat(miss.kernel.O).map(Math.abs), 1e-30);
  const opts = { rows, cols: d, rowsValid: rows, colsValid: d, scale: 'diverging', max };
  views.yours.draw({ ...opts, values: flat(miss.state.O), name: `${who} O` });
  views.kernel.draw({ ...opts, values: flat(miss.kernel.O), name: 'kernel O' });
  const table = $('lab-rows');
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const t of ['row', `${who} m`, 'kernel m', `${who} l`, 'kernel l']) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = t;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (let r = 0; r < rows; r++) {
    const tr = body.insertRow();
    if (r === miss.row) tr.className = 'miss';
    for (const v of [rowStart + r, miss.state.m?.[r], miss.kernel.m[r], miss.state.l?.[r], miss.kernel.l[r]]) tr.insertCell().textContent = typeof v === 'number' ? fmt(v) : String(v);
  }
}

// kernelState is the reference kernel's state after step (bh, i, j) of its
// trace, as the views draw it: rows of m, l and O.
function kernelState(model, bh, i, j) {
  const r = model.steps.find((x) => x.kind === 'flash_step' && x.bh === bh && x.i === i && x.j === j);
  if (!r) return null;
  const d = model.h.D, rows = r.rowsValid;
  return {
    m: Array.from(r.m_new.subarray(0, rows)), l: Array.from(r.l.subarray(0, rows)),
    O: Array.from({ length: rows }, (_, x) => Array.from(r.o.subarray(x * d, (x + 1) * d))),
    step: model.steps.indexOf(r),
  };
}

// studentState is the same from a verdict's records.
function studentState(steps, kernel, bh, i, j) {
  const rows = kernel.m.length, d = kernel.O[0].length;
  const st = { m: new Array(rows).fill(NaN), l: new Array(rows).fill(NaN), O: Array.from({ length: rows }, () => new Array(d).fill(NaN)) };
  for (const s of steps) {
    if (s.BH === bh && s.I === i && s.J === j && s.R < rows) {
      st.m[s.R] = f32(s.M);
      st.l[s.R] = f32(s.L);
      st.O[s.R] = floats(s.O);
    }
  }
  return st;
}

// The worker sends a float as its bits, and arrays of them as base64.
const bits = new DataView(new ArrayBuffer(4));
const f32 = (u) => { bits.setUint32(0, u); return bits.getFloat32(0); };
function floats(b64) {
  const raw = Uint8Array.from(atob(b64 || ''), (c) => c.charCodeAt(0));
  return Array.from(new Float32Array(raw.buffer, 0, raw.length / 4));
}

// stepRecords steps a kernel's records (a student's verdict, or the
// solution's recorded one), each kv-tile of each q-tile beside the
// reference kernel's state after the same step, starting at key
// ("bh,i,j") or the first.
const records = { steps: [], who: 'your', keys: [], model: null };
export function stepRecords(model, steps, who, key) {
  Object.assign(records, { steps, who, model, keys: [...new Set(steps.map((s) => `${s.BH},${s.I},${s.J}`))] });
  if (!records.keys.length) return;
  $('lab-records').hidden = false;
  $('lab-records-who').textContent = who === 'your' ? 'Your records' : "The solution's records";
  const pick = $('lab-records-step');
  pick.replaceChildren(...records.keys.map((k) => {
    const [bh, i, j] = k.split(',').map(Number);
    return new Option(`q-tile ${i}, kv-tile ${j}${bh ? `, batch-head ${bh}` : ''}`, k);
  }));
  pick.selectedIndex = Math.max(records.keys.indexOf(key), 0);
  showRecords();
}
export function showRecords(miss) {
  const [bh, i, j] = $('lab-records-step').value.split(',').map(Number);
  const model = records.model;
  const kernel = kernelState(model, bh, i, j);
  if (!kernel) return;
  showMiss(i * model.h.Br, { row: miss?.row, state: studentState(records.steps, kernel, bh, i, j), kernel }, records.who);
  $('lab-run-link').href = siteURL(`/step?${page.run}&step=${kernel.step + 1}`);
}
function moveRecords(by) {
  const pick = $('lab-records-step');
  pick.selectedIndex = Math.min(Math.max(pick.selectedIndex + by, 0), records.keys.length - 1);
  showRecords();
}
$('lab-records-step')?.addEventListener('change', () => showRecords());
$('lab-records-prev')?.addEventListener('click', () => moveRecords(-1));
$('lab-records-next')?.addEventListener('click', () => moveRecords(1));
