// Package static owns the browser's side of flashstep: the ES modules that
// decode trace frames into typed arrays and draw the stepper's views, the
// stylesheet, and the third-party libraries that `make assets` copies from
// node_modules into vendor/. All of it is embedded in the server binary.
package static

import "embed"

// Files is the static tree, served under /static/. vendor/ is present once
// `make assets` has run; without it pages load but draw no colours or math.
//
//go:embed *
var Files embed.FS
