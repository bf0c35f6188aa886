// The lessons' memory calculator: what naive attention's N×N matrices take
// in device memory against FlashAttention's inputs and outputs only, for a
// problem the student types, from the server's /api/memory. A calculator
// placed with pass=backward (its form's hidden pass field) plans the
// backward: naive_bwd's P, dP and dS against flash2_bwd's D.
import { apiFetch } from './site.js';
const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

function bytes(n) {
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return `${n.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

function row(label, value, cls = '') {
  const tr = document.createElement('tr');
  if (cls) tr.className = cls;
  const th = document.createElement('th');
  th.textContent = label;
  const td = document.createElement('td');
  td.textContent = value;
  tr.append(th, td);
  return tr;
}

async function update(form, out) {
  const q = new URLSearchParams(new FormData(form));
  let res;
  let body;
  try {
    res = await apiFetch(`/api/memory?${q}`);
    body = await res.json();
  } catch (err) {
    out.textContent = `The server could not be reached: ${err.message}`;
    return;
  }
  if (!res.ok) {
    out.textContent = (body.fields || []).map((f) => f.message).join('; ') || body.error;
    out.className = 'memory-out error';
    return;
  }
  const p = body.plan;
  const naiveTotal = `${bytes(p.naive_bytes)} ${p.naive_fits ? 'fits' : 'does not fit'}`;
  const flashTotal = `${bytes(p.flash_bytes)} ${p.flash_fits ? 'fits' : 'does not fit'}`;
  const naiveCls = p.naive_fits ? 'naive' : 'naive over';
  const flashCls = p.flash_fits ? 'flash' : 'flash over';
  const table = document.createElement('table');
  table.className = 'memory-table';
  table.dataset.pass = p.pass;
  let kernels;
  if (p.pass === 'backward') {
    table.append(
      row('Q, K, V, O, dO, L and dQ, dK, dV (both kernels)', bytes(p.inputs_bytes)),
      row('naive backward: P, dP and dS, N×N each', bytes(p.naive_nn_bytes), 'naive'),
      row('naive backward in all', naiveTotal, naiveCls),
      row('flash backward: D, one number per row', bytes(p.flash_delta_bytes), 'flash'),
      row('flash backward in all (S, P, dP and dS stay on chip)', flashTotal, flashCls),
      row('one flash backward block on chip (64×64 tiles)', bytes(p.flash_tile_bytes)),
      row('longest N the naive backward fits, these B, H, d', p.naive_max_n.toLocaleString('en')),
      row('longest N the flash backward fits', p.flash_max_n.toLocaleString('en')),
    );
    kernels = `The backward kernels' buffers (${p.naive_kernel} against ${p.flash_kernel}), float32 throughout.`;
  } else {
    table.append(
      row('Q, K, V, O and LSE (both kernels)', bytes(p.inputs_bytes)),
      row('naive: S and P, N×N each', bytes(p.naive_sp_bytes), 'naive'),
      row('naive in all', naiveTotal, naiveCls),
      row('flash in all (S and P stay on chip)', flashTotal, flashCls),
      row('one flash block on chip (64×64 tiles)', bytes(p.flash_tile_bytes)),
      row('longest N naive fits, these B, H, d', p.naive_max_n.toLocaleString('en')),
      row('longest N flash fits', p.flash_max_n.toLocaleString('en')),
    );
    kernels = 'float32 throughout, as the traced kernels keep it.';
  }
  const gpu = document.createElement('p');
  gpu.className = 'note';
  gpu.textContent = `Device memory: ${bytes(p.gpu_bytes)} on ${body.gpu}. ${kernels}`;
  out.className = 'memory-out';
  out.replaceChildren(table, gpu);
}

export function initMemoryCalculators() {
  for (const form of document.querySelectorAll('form.memory-calc')) {
    const out = form.parentElement.querySelector('.memory-out');
    let timer = null;
    form.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => update(form, out), 150);
    });
    form.addEventListener('submit', (ev) => ev.preventDefault());
    update(form, out);
  }
}
