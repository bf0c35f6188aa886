// Package docs holds the measured figures' worklogs (the Markdown files
// of this folder), embedded so that the server can show a lesson's
// sources: a figure a lesson quotes names the file it was measured in, and
// a student can open it.
package docs

import "embed"

// Files are the worklogs, by name (GPU.md, LADDER.md, …).
//
//go:embed *.md
var Files embed.FS
