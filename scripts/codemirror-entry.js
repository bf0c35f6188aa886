// The parts of CodeMirror 6 the lab's editor uses, bundled by esbuild into
// static/vendor/codemirror/codemirror.js (`make assets`): the packages
// themselves come from npm (package.json), never from this repository.
export { EditorView, basicSetup } from 'codemirror'; // EditorView.findFromDOM: the browser tests type through the real editor
export { EditorState } from '@codemirror/state';
export { keymap } from '@codemirror/view';
export { indentWithTab } from '@codemirror/commands';
export { syntaxTree, ensureSyntaxTree } from '@codemirror/language';
export { cpp } from '@codemirror/lang-cpp';
export { javascript } from '@codemirror/lang-javascript';
export { setDiagnostics, lintGutter } from '@codemirror/lint';
