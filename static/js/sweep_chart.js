// The sweep's charts (Chart.js): time and throughput against N on log
// scales, a line per kernel beside PyTorch's recorded references, and a
// cross where a kernel ran out of memory.
import { rungs } from './rungs.js';

const Chart = globalThis.Chart;

// The charts drawn, by the value they plot: a new draw replaces one.
const charts = {};

// onCPU tells a sweep of the Go mirrors from one timed on a GPU.
export const onCPU = (rec) => /^CPU mirror/.test(rec.source || '');

// The naive family in reds and browns, the flash family in blues; PyTorch's
// references dashed.
// COLOURS are each series' line: flashstep's kernels' from the registry,
// PyTorch's here.
const COLOURS = { ...Object.fromEntries(rungs.map((r) => [r.name, r.colour])), 'SDPA flash (bf16)': '#2a9d8f', 'SDPA cuDNN (bf16)': '#6a4c93', 'PyTorch naive (bf16)': '#e9a03b' };

// outOfMemoryMarks draws a cross at the top of the plot at each N where a
// kernel ran out of memory, labelled: the strongest fact of a sweep, on the
// chart itself.
const outOfMemoryMarks = {
  id: 'outOfMemoryMarks',
  afterDatasetsDraw(chart, _args, opts) {
    const marks = opts.marks || [];
    if (!marks.length) return;
    const { ctx, chartArea } = chart;
    const x = chart.scales.x;
    ctx.save();
    marks.forEach((m, k) => {
      const px = x.getPixelForValue(m.n);
      const py = chartArea.top + 14 + 22 * k;
      ctx.strokeStyle = COLOURS[m.variant] || '#b3261e';
      ctx.lineWidth = 3;
      ctx.beginPath();
      ctx.moveTo(px - 7, py - 7); ctx.lineTo(px + 7, py + 7);
      ctx.moveTo(px + 7, py - 7); ctx.lineTo(px - 7, py + 7);
      ctx.stroke();
      ctx.fillStyle = '#7a1a14';
      ctx.font = 'bold 12px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      const text = `${m.variant}: out of memory at N=${m.n}`;
      const w = ctx.measureText(text).width;
      const left = px + 12 + w > chartArea.right;
      ctx.textAlign = left ? 'right' : 'left';
      ctx.fillText(text, left ? px - 12 : px + 12, py);
    });
    ctx.restore();
  },
};

// OURS are flashstep's kernels, by their data type; the rest are PyTorch's.
const OURS = Object.fromEntries(rungs.map((r) => [r.name, r.dtype]));

// seriesLabel names a line in the legend: flashstep's kernels with their
// data type, and where the chart holds backward lines, every line's pass
// (PyTorch's references are forward passes).
function seriesLabel(s, rec, mixed) {
  if (!OURS[s.name]) return mixed ? s.name.replace(/ \(bf16\)$/, ', forward (bf16)') : s.name;
  const pass = s.backward ? ', backward' : mixed ? ', forward' : '';
  return `${s.name} (${OURS[s.name]}${pass}${onCPU(rec) ? ', CPU mirror' : ''})`;
}
// plot draws series (by name: {name, dashed, backward, points}) on the
// chart of canvasId, the value key of each point against N on log
// scales, with a cross at each out-of-memory point of oom; ns are the Ns
// swept, each a tick.
export function plot(key, canvasId, series, label, oom, ns, rec) {
  if (!Chart) return;
  const mixed = Object.values(series).some((s) => s.backward);
  const datasets = Object.values(series).map((s) => ({
    label: seriesLabel(s, rec, mixed),
    data: s.points.sort((a, b) => a.n - b.n).map((p) => ({ x: p.n, y: p[key] })),
    borderColor: COLOURS[s.name] || '#555',
    backgroundColor: COLOURS[s.name] || '#555',
    // PyTorch's references dashed; a backward pass dotted, its points
    // triangles, so that it reads apart from the forward's lines.
    borderDash: s.dashed ? [6, 4] : s.backward ? [2, 3] : [],
    pointStyle: s.backward ? 'triangle' : 'circle',
    pointRadius: s.backward ? 4 : 3,
    tension: 0,
  }));
  const allNs = [...new Set([...ns, ...datasets.flatMap((d) => d.data.map((p) => p.x))])].sort((a, b) => a - b);
  const marks = oom.map((r) => ({ n: r.n, variant: r.variant }));
  const xScale = {
    type: 'logarithmic',
    min: allNs[0] / 1.15,
    max: allNs[allNs.length - 1] * 1.15,
    title: { display: true, text: 'sequence length N' },
    // One tick at each N the sweep ran, labelled.
    afterBuildTicks: (axis) => { axis.ticks = allNs.map((v) => ({ value: v })); },
    ticks: { autoSkip: false, maxRotation: 0, callback: (v) => (v >= 1024 ? `${v / 1024}K` : String(v)) },
  };
  const old = charts[key];
  if (old) old.destroy();
  charts[key] = new Chart(document.getElementById(canvasId), {
    type: 'line',
    data: { datasets },
    plugins: [outOfMemoryMarks],
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: true,
      scales: {
        x: xScale,
        y: { type: 'logarithmic', title: { display: true, text: label } },
      },
      // A compact legend: seven series must leave the plot its room.
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 14, boxHeight: 8, padding: 6, font: { size: 11 } } }, outOfMemoryMarks: { marks } },
    },
  });
}
