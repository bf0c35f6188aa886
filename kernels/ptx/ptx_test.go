package ptx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"

	"flashstep/kernels"
)

// Every module the registry names is committed, gzipped as make ptx and
// scripts/ptx-hopper write it (no file name, no time stamp: the same PTX
// gives the same bytes, so a rebuild that changes nothing shows no diff),
// and reads back as PTX text; no file is committed that no module names;
// Hash is the hash of the texts in the modules' order.
func TestModulesAreCommittedGzipped(t *testing.T) {
	named := map[string]bool{}
	h := sha256.New()
	for _, m := range kernels.Modules {
		named[m+".ptx.gz"] = true
		gz, err := files.ReadFile(m + ".ptx.gz")
		if err != nil {
			t.Fatalf("module %s: %v", m, err)
		}
		// RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS; FLG's FNAME bit is 8.
		if len(gz) < 10 || gz[0] != 0x1f || gz[1] != 0x8b || gz[3]&8 != 0 || !bytes.Equal(gz[4:8], []byte{0, 0, 0, 0}) {
			t.Errorf("%s.ptx.gz is not gzip -n's output (a name or a time stamp in its header): %x", m, gz[:min(10, len(gz))])
		}
		text, err := Text(m)
		if err != nil {
			t.Fatalf("module %s: %v", m, err)
		}
		if !strings.Contains(text, ".version ") || !strings.Contains(text, ".entry ") {
			t.Errorf("%s.ptx.gz does not read back as PTX", m)
		}
		h.Write([]byte(text))
	}
	if want := hex.EncodeToString(h.Sum(nil))[:16]; Hash() != want {
		t.Errorf("Hash() = %s, the modules' texts hash to %s", Hash(), want)
	}
	all, _ := fs.Glob(files, "*.ptx.gz")
	for _, f := range all {
		if !named[f] {
			t.Errorf("%s is committed but no module of the registry is it", f)
		}
	}
}
