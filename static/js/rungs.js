// The rungs of the kernel ladder as the server's registry describes them
// (kernels.RungsForPages): every page carries the list as JSON, so that no
// script names a rung's kernels, colour or traffic itself.
const el = typeof document === 'undefined' ? null : document.getElementById('fs-rungs');
export const rungs = el ? JSON.parse(el.textContent) : [];

// rung is the entry of the rung named name, or undefined.
export const rung = (name) => rungs.find((r) => r.name === name);
