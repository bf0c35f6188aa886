//go:build js

package recordings

import (
	"embed"
	"io/fs"
	"sync"
	"testing/fstest"
)

// In the browser (the static site's WebAssembly, cmd/sitewasm) Files holds
// list.txt and the JSON figures, which are small, and of the recorded
// traces (20 MB, served beside the site as files) only those the page has
// fetched and handed over with Provide: a lesson's roles figures read two.
//
//go:embed list.txt *.json
var small embed.FS

// Files is small, and the traces Provide added.
var Files = &provided{base: small, extra: fstest.MapFS{}}

// Provide adds a recorded trace, name.fstrace as the page fetched it.
func Provide(name string, b []byte) {
	Files.mu.Lock()
	defer Files.mu.Unlock()
	Files.extra[name+".fstrace"] = &fstest.MapFile{Data: b, Mode: 0o444}
}

type provided struct {
	base  embed.FS
	mu    sync.Mutex
	extra fstest.MapFS
}

func (p *provided) Open(name string) (fs.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.extra[name]; ok {
		return p.extra.Open(name)
	}
	return p.base.Open(name)
}

func (p *provided) ReadFile(name string) ([]byte, error) { return fs.ReadFile(p, name) }

func (p *provided) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(p.base, name) }
