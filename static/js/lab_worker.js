// The lab's sandbox: a dedicated worker that runs a student's JavaScript.
// The page sends the source, the name of the function it must define and
// the calls to make; the worker answers with what each call returned (and,
// for a loop, every record(...) it made), or with the first error and its
// line. The page ends the worker when it runs past its time limit. The
// server sends this file with a policy of its own (web/static.go): eval for
// the student's code, and no network at all.

// line finds the student's line in an error's stack: the source is
// evaluated as student.js, line for line.
function where(e) {
  const m = /student\.js:(\d+):(\d+)/.exec(String(e && e.stack));
  return m ? { line: Number(m[1]), column: Number(m[2]) } : {};
}

function failure(e) {
  return { message: `${e && e.name ? `${e.name}: ` : ''}${e && e.message !== undefined ? e.message : String(e)}`, ...where(e) };
}

self.onmessage = (ev) => {
  const { source, entry, calls } = ev.data;
  let fn;
  try {
    // Indirect eval: the student's code runs in the worker's global scope,
    // where it sees nothing of the page.
    fn = (0, eval)(`${source}\n;typeof ${entry} === 'function' ? ${entry} : undefined\n//# sourceURL=student.js`);
  } catch (e) {
    self.postMessage({ error: failure(e) });
    return;
  }
  if (typeof fn !== 'function') {
    self.postMessage({ error: { message: `Your code defines no function ${entry}: the page calls function ${entry}(…).` } });
    return;
  }
  const results = [];
  for (const call of calls) {
    const records = [];
    const args = call.args.slice();
    if (call.record) args.push((...r) => records.push(structuredClone(r)));
    try {
      const value = fn(...args);
      results.push({ value: structuredClone(value), records });
    } catch (e) {
      self.postMessage({ error: failure(e), at: results.length });
      return;
    }
  }
  self.postMessage({ results });
};
