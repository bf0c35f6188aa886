// The lab's code editor: CodeMirror 6 (syntax colours, line numbers, the
// keyboard's usual moves; Tab indents, and Escape then Tab leaves the
// editor), with the few things the lab asks of it: the text, a syntax
// error's line, and a message marked at a line.
import {
  EditorView, basicSetup, EditorState, keymap, indentWithTab, ensureSyntaxTree, cpp, javascript, setDiagnostics, lintGutter,
} from '../vendor/codemirror/codemirror.js';

export function editor(parent, { doc, lang, onChange }) {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        basicSetup,
        keymap.of([indentWithTab]),
        lang === 'cuda' ? cpp() : javascript(),
        lintGutter(),
        EditorView.contentAttributes.of({ 'aria-label': `Your code (${lang === 'cuda' ? 'CUDA C' : 'JavaScript'})`, 'data-testid': 'code' }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) {
            view.dispatch(setDiagnostics(view.state, []));
            onChange?.(u.state.doc.toString());
          }
        }),
      ],
    }),
  });
  return {
    view,
    get: () => view.state.doc.toString(),
    set: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    // syntaxError is the first place the parser could not read, or null.
    syntaxError() {
      const tree = ensureSyntaxTree(view.state, view.state.doc.length, 1000);
      let at = null;
      tree?.iterate({ enter: (n) => { if (at === null && n.type.isError) at = n.from; return at === null; } });
      return at === null ? null : { line: view.state.doc.lineAt(at).number };
    },
    // mark underlines line n with a message, until the text changes.
    mark(n, message) {
      if (n < 1 || n > view.state.doc.lines) return;
      const line = view.state.doc.line(n);
      view.dispatch(setDiagnostics(view.state, [{ from: line.from, to: line.to, severity: 'error', message }]));
    },
  };
}
