// The static site's worker: runs the WebAssembly (cmd/sitewasm) off the
// page's thread and answers the page's calls (site.js). A classic worker,
// started as static/js/site_worker.js?base=/…/, because Go's wasm_exec.js
// is a classic script. Messages in: {id, op, args}; out: {id, chunk} for
// each chunk of a trace, then {id, ok: true, value} or {id, ok: false,
// error}, the error being the server's API error JSON; {op: 'cancel',
// args: [traceID]} stops a trace, which then answers.
'use strict';

const base = new URL(self.location.href).searchParams.get('base') || '/';
importScripts(`${base}wasm/wasm_exec.js`);

const ready = (async () => {
  const go = new Go();
  const res = await fetch(`${base}wasm/site.wasm`);
  if (!res.ok) throw new Error(JSON.stringify({ error: `the site's WebAssembly did not load (${res.status})` }));
  const { instance } = await WebAssembly.instantiateStreaming(res, go.importObject);
  go.run(instance); // sets self.flashstep, and runs for the worker's life
})();

const message = (e) => (e && e.message ? e.message : JSON.stringify({ error: String(e) }));

self.onmessage = async ({ data: { id, op, args } }) => {
  try {
    await ready;
    let value;
    switch (op) {
      case 'trace':
        await self.flashstep.trace(id, args[0], (chunk) => self.postMessage({ id, chunk }, [chunk.buffer]));
        break;
      case 'cancel':
        self.flashstep.cancel(args[0]);
        return; // the cancelled call answers for itself
      case 'recording':
        value = await self.flashstep.recording(args[0]);
        break;
      case 'grade':
        value = await self.flashstep.grade(args[0], args[1], args[2], args[3]);
        break;
      case 'get':
        value = await self.flashstep.get(args[0], args[1]);
        break;
      default:
        throw new Error(JSON.stringify({ error: `no such call: ${op}` }));
    }
    self.postMessage({ id, ok: true, value });
  } catch (e) {
    self.postMessage({ id, ok: false, error: message(e) });
  }
};
