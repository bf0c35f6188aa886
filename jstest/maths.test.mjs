// Formulas typeset at make generate: the lessons' (lessons/maths_gen.json)
// and the stepper's column headings (static/js/formulas_gen.js). Each entry
// is KaTeX's own HTML for its key,
// typeset by the KaTeX that package.json pins, so a KaTeX upgrade without
// `make generate` fails here rather than pairing old markup with a new
// stylesheet.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './helpers.mjs';
import { typeset, headsModule } from '../scripts/katex-typeset.mjs';
import { ROW_HEADS, BACKWARD_HEADS } from '../static/js/formulas.js';
import { typesetHeads } from '../static/js/formulas_gen.js';
import { tex } from '../static/js/format.js';

test('every typeset formula is KaTeX\'s HTML for its TeX, display or inline as its key says', () => {
  const stored = JSON.parse(readFileSync(join(root, 'lessons/maths_gen.json'), 'utf8'));
  const keys = Object.keys(stored);
  assert.ok(keys.length >= 250, `maths_gen.json holds ${keys.length} formulas; the course has more`);
  let display = 0;
  for (const key of keys) {
    const kind = key.slice(0, 2);
    assert.ok(kind === 'D ' || kind === 'I ', `key ${JSON.stringify(key)} starts with neither "D " nor "I "`);
    const f = { tex: key.slice(2), display: kind === 'D ' };
    display += f.display;
    assert.equal(stored[key], typeset(f), `${key}: not KaTeX's HTML for it; run make generate`);
    assert.ok(!stored[key].includes('katex-error'), `${key}: KaTeX could not parse it`);
  }
  assert.ok(display > 0, 'no display formula among them');
});

test('the stepper\'s headings module is KaTeX\'s HTML for every heading of formulas.js', () => {
  const stored = readFileSync(join(root, 'static/js/formulas_gen.js'), 'utf8');
  assert.equal(stored, headsModule(), 'static/js/formulas_gen.js is stale: run make generate');
  const heads = [...Object.values(ROW_HEADS), ...Object.values(BACKWARD_HEADS)];
  for (const [tex, words] of heads) {
    assert.ok(typesetHeads[tex]?.startsWith('<span class="katex">'), `heading ${tex}: not typeset`);
    assert.ok(!typesetHeads[tex].includes('katex-error'), `heading ${tex}: KaTeX could not parse it`);
    assert.ok(words && !/\\/.test(words), `heading ${tex}: its words for a screen reader are ${JSON.stringify(words)}`);
  }
});

test('tex() draws a heading from the generated module, and any other formula as text until KaTeX is there', () => {
  const el = { innerHTML: '', textContent: '' };
  const [alpha] = ROW_HEADS.alpha;
  tex(el, alpha, { output: 'html' });
  assert.equal(el.innerHTML, typesetHeads[alpha]);
  const other = { innerHTML: '', textContent: '' };
  tex(other, 'x^{2} \\text{ not a heading}', { output: 'html' });
  assert.equal(other.textContent, 'x^{2} \\text{ not a heading}');
  assert.equal(other.innerHTML, '');
});

test('tex() typesets the last formula asked of an element once KaTeX arrives, and only that one', async () => {
  // A page without KaTeX: the script element the loader adds is answered
  // by a stand-in KaTeX that records what it renders.
  const rendered = [];
  const added = [];
  const saved = { document: globalThis.document, katex: globalThis.katex };
  globalThis.document = {
    body: null,
    querySelector: () => null,
    createElement: () => ({}),
    head: { append: (s) => added.push(s) },
  };
  try {
    const { tex: freshTex } = await import(`../static/js/format.js?fresh=${Date.now()}`);
    const el = { textContent: '', innerHTML: '', isConnected: true };
    freshTex(el, 'a^{1}');
    freshTex(el, 'b^{2}');
    const other = { textContent: '', innerHTML: '', isConnected: true };
    freshTex(other, 'c^{3}');
    assert.equal(el.textContent, 'b^{2}', 'the formula shows as text until KaTeX arrives');
    assert.equal(added.length, 1, 'KaTeX is asked for once');
    globalThis.katex = { render: (f, target) => rendered.push([f, target]) };
    added[0].onload();
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(rendered.map(([f, target]) => [f, target === el ? 'el' : 'other']), [['b^{2}', 'el'], ['c^{3}', 'other']]);
  } finally {
    globalThis.document = saved.document;
    globalThis.katex = saved.katex;
  }
});
