// What every part of a lab exercise's page shares: the exercise (its
// page data), the status line that gives each verdict (and tells a room
// about it), and the exercise's kernel run, streamed once.
import { startRun } from './stream.js';
import { TraceModel } from './model.js';

// page is the exercise as the server renders it; saved is where this
// browser keeps the student's code.
export const page = JSON.parse(document.getElementById('fs-lab').textContent);
export const $ = (id) => document.getElementById(id);
export const saved = `flashstep.lab.${page.id}`;

// say puts a verdict (or "running") and its words in the status line, with
// data (the place of a miss, a seed) for tests and styles to read.
const status = $('lab-status');
export function say(verdict, text, data = {}) {
  // A verdict on the student's code (not "running", nor a run that could
  // not start) is the room's to count, where the page is in one.
  if (['pass', 'fail', 'timeout', 'error', 'compile', 'memcheck', 'racecheck'].includes(verdict) && data.counted !== false) {
    document.dispatchEvent(new CustomEvent('flashstep:lab-result', { detail: { verdict, ticket: data.ticket } }));
  }
  delete data.counted;
  delete data.ticket;
  status.textContent = text;
  status.dataset.verdict = verdict;
  for (const k of Object.keys(status.dataset)) if (k !== 'verdict') delete status.dataset[k];
  for (const [k, v] of Object.entries(data)) if (v !== undefined) status.dataset[k] = String(v);
}

// kernelRun streams the exercise's kernel run once and keeps it.
let kernel = null;
export function kernelRun() {
  kernel ??= new Promise((resolve, reject) => {
    let model = null;
    startRun(page.run, {
      onHeader: (h) => { model = new TraceModel(h); },
      onRecord: (r) => model.add(r),
      onDone: (info) => (info.cancelled ? reject(new Error('the kernel run was cancelled')) : resolve(model)),
      onError: (msg) => reject(new Error(msg)),
    });
  });
  kernel.catch(() => { kernel = null; });
  return kernel;
}
