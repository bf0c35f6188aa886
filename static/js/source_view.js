// The kernel beside the step: where the numbers come from, the compiler's
// figures for the kernels that computed them, and the kernel's CUDA source
// with the lines the step ran lit.
import { apiFetch } from './site.js';
import { materialises } from './steps.js';
import * as backward from './backward_model.js';
import { startsSplit } from './splits.js';
import { $, know, page, state } from './stepper_page.js';

// showKernelFigures says what ptxas (and, on a GPU, the driver) reported of
// the kernels that compute this run.
// kernelTables caches /api/kernels per run: the table, and the kernels the
// run launches (Launched), named by the server's registry.
const kernelTables = new Map();
export async function showKernelFigures(h) {
  const el = $('kernel-figures');
  el.textContent = '';
  // A widget that shows some panels only (a lesson's) and not the
  // kernel's source has no place for the compiler's figures.
  if (el.hidden) return;
  if (!know.knows('registers')) {
    el.textContent = `The kernel's registers and spills, as its compiler reports them: ${know.lesson('registers')}.`;
    return;
  }
  const q = new URLSearchParams({ variant: h.variant, n: h.N, d: h.D, br: h.Br, bc: h.Bc, causal: h.causal ? '1' : '0' });
  // nq and kv_heads where they differ from N and heads, as the server
  // writes a run's URL.
  if (h.Nq !== h.N) q.set('nq', h.Nq);
  if (h.kvHeads !== h.heads) q.set('kv_heads', h.kvHeads);
  const run = q.toString();
  if (!kernelTables.has(run)) kernelTables.set(run, await apiFetch('/api/kernels?' + run).then((r) => r.json()).catch(() => null));
  const kernelTable = kernelTables.get(run);
  if (!kernelTable) return;
  const names = kernelTable.Launched || [];
  const module = h.variant + (h.source === 'cpu' ? '' : '_traced');
  const parts = [];
  for (const n of names) {
    const row = kernelTable.Rows.find((r) => r.Module === module && r.Kernel === n);
    if (!row) continue;
    let s = `${n}: ${row.Registers} registers, ${row.SpillStores ? `${row.SpillStores} B of spills` : 'no spills'}` +
      `${row.StackBytes ? `, ${row.StackBytes} B stack` : ''} (ptxas, sm_90)`;
    if (row.Driver) s += `; driver: ${row.DriverRegisters} registers, ${row.LocalBytes} B local memory per thread`;
    parts.push(s);
  }
  if (parts.length) el.textContent = `Kernel${parts.length > 1 ? 's' : ''} (${module}.ptx): ${parts.join('; ')}. More on the Kernels page.`;
  else el.textContent = !materialises(h.variant) && h.source === 'cpu' ? `No compiled GPU kernel has ${h.Br}×${h.Bc} tiles with d=${h.D}: the mirror runs any shape.` : '';
}

// showSource says where the numbers come from; the folded form above it
// already names the run.
export function showSource(h) {
  const when = h.recordedUnix ? `, recorded ${new Date(h.recordedUnix * 1000).toISOString().slice(0, 10)}` : '';
  $('source').textContent = `Numbers from: ${h.label}${when} · ${h.dtype}`;
  // Fewer queries than keys and grouped heads are named; a square run's
  // words are as they were.
  const nq = h.Nq !== h.N ? `, Nq=${h.Nq} (the last ${h.Nq} of the N positions)` : '';
  const kvWords = `${h.kvHeads} K/V head${h.kvHeads === 1 ? '' : 's'}`;
  const kv = h.kvHeads !== h.heads ? ` over ${kvWords}` : '';
  $('source').title = `${h.variant}, ${h.dtype}, N=${h.N}${nq}, d=${h.D}, Br×Bc=${h.Br}×${h.Bc}${h.causal ? ', causal' : ''}, ` +
    `batch ${h.batch} × ${h.heads} heads${kv}, inputs ${h.pattern} (seed ${h.seed})`;
  if (!page.valid || state.transport.startsWith('file')) {
    $('run-summary').textContent = `${h.variant} · N=${h.N}${h.Nq !== h.N ? ` · Nq=${h.Nq}` : ''} · d=${h.D} · Br×Bc=${h.Br}×${h.Bc}` +
      `${h.kvHeads !== h.heads ? ` · ${h.heads} heads over ${kvWords}` : ''}${h.causal ? ' · causal' : ''} · ${h.pattern} inputs, seed ${h.seed}`;
  }
}

// The source of each kernel and which of its marked phases each kind of
// step ran (kernels/source.go owns both; the markers live in the .cu).
const kernelSources = new Map();

export async function loadKernelSource(variant) {
  if (!kernelSources.has(variant)) {
    kernelSources.set(variant, null);
    const src = await apiFetch(`/api/source?variant=${variant}`).then((r) => (r.ok ? r.json() : null)).catch(() => null);
    kernelSources.set(variant, src);
  }
  buildSourceView(variant);
  if (state.model && state.k >= 0) drawKernelSource(state.model.h, state.model.steps[state.k]);
}

function buildSourceView(variant) {
  const src = kernelSources.get(variant);
  const pre = $('kernel-source');
  if (!src || pre.dataset.variant === variant) return;
  pre.dataset.variant = variant;
  const phaseOf = new Array(src.lines.length + 1).fill('');
  for (const p of src.phases) for (const r of p.regions) for (let n = r.first; n <= r.last; n++) phaseOf[n] = p.name;
  pre.replaceChildren(...src.lines.map((text, k) => {
    const line = document.createElement('span');
    line.className = 'line';
    line.dataset.n = String(k + 1);
    if (phaseOf[k + 1]) line.dataset.phase = phaseOf[k + 1];
    line.textContent = text + '\n';
    return line;
  }));
  $('source-caption').textContent = `Kernel source, ${src.file}: the lines this step ran are lit`;
  $('source-phases').replaceChildren(...src.phases.map((p) => {
    const li = document.createElement('li');
    li.dataset.phase = p.name;
    li.textContent = p.title;
    li.onclick = () => scrollCodeTo(pre.querySelector(`[data-phase="${p.name}"]`));
    return li;
  }));
}

function scrollCodeTo(line) {
  if (!line) return;
  const box = $('code-box');
  box.scrollTop = line.offsetTop - 8; // the box is the lines' offset parent
}

function stepKey(h, r) {
  if (backward.isBackward(h)) return backward.stepKey(h, r);
  // A split-KV trace's first kv-tile of each split loads Q as a block's
  // first does; a timing record may close a split or stand for a merge.
  const m = state.model;
  const first = m?.hasSplits ? startsSplit(m, state.k) : r.j === 0;
  if (r.kind === 'timing') return m?.timingSplit.get(r)?.kind ?? (r.j < 0 ? 'epilogue' : first ? 'flash_step:first' : 'flash_step');
  return r.kind === 'flash_step' && first ? 'flash_step:first' : r.kind;
}

export function drawKernelSource(h, r) {
  const src = kernelSources.get(h.variant);
  if (!src || $('kernel-source').dataset.variant !== h.variant) return;
  const lit = new Set(src.steps[stepKey(h, r)] || []);
  let first = null;
  for (const line of $('kernel-source').children) {
    const on = lit.has(line.dataset.phase);
    line.classList.toggle('lit', on);
    if (on && !first) first = line;
  }
  for (const li of $('source-phases').children) li.classList.toggle('lit', lit.has(li.dataset.phase));
  $('kernel-source').dataset.lit = [...lit].join(',');
  scrollCodeTo(first);
}
