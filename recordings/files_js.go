//go:build js

package recordings

import (
	"embed"
	"io/fs"
	"strings"
	"sync"
	"testing/fstest"
)

// In the browser (the static site's WebAssembly, cmd/sitewasm) Files holds
// list.txt and the JSON figures, which are small, and of the recorded
// traces (20 MB, served beside the site as files) those handed over with
// Provide or, on first reading, fetched with Fetch: a lesson's roles
// figures read two.
//
//go:embed list.txt *.json
var small embed.FS

// Files is small, and the traces Provide added.
var Files = &provided{base: small, extra: fstest.MapFS{}}

// Fetch, when set, brings a recorded trace the page has not handed over
// (name.fstrace, from the site's recordings folder); it may block, and is
// called from a goroutine, never from JavaScript's own call.
var Fetch func(name string) ([]byte, error)

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
	_, ok := p.extra[name]
	p.mu.Unlock()
	if !ok && Fetch != nil && strings.HasSuffix(name, ".fstrace") && fs.ValidPath(name) && !strings.Contains(name, "/") {
		b, err := Fetch(strings.TrimSuffix(name, ".fstrace"))
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		Provide(strings.TrimSuffix(name, ".fstrace"), b)
		ok = true
	}
	if ok {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.extra.Open(name)
	}
	return p.base.Open(name)
}

// ReadFile reads through Open (fs.ReadFile of p itself would call this).
func (p *provided) ReadFile(name string) ([]byte, error) { return fs.ReadFile(openOnly{p}, name) }

type openOnly struct{ fs.FS }

func (p *provided) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(p.base, name) }
