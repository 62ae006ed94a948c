package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

// citeRef matches one bracketed citation, [K3] or [E7, K2].
var citeRef = regexp.MustCompile(`\[((?:[KE][0-9]+)(?:\s*[,;]\s*[KE][0-9]+)*)\]`)

// maxCiteBytes bounds how much of a deliverable is read for citations.
const maxCiteBytes = 4 << 20

// RecordCitations reads what each deliverable cites and records it when
// the file changed since its last reading (citations events), so that
// the ledger, a fold of the record, knows which claims the deliverables
// cite. Without contract deliverables, every file under /outputs (but
// scratch) is read.
func (w *Writer) RecordCitations() {
	if w.cfg.FS == nil || w.cfg.Log == nil {
		return
	}
	paths := slices.Clone(w.cfg.Deliverables)
	if len(paths) == 0 {
		paths = outputFiles(w.cfg.FS)
	}
	for _, p := range paths {
		data, ok := readPlane(w.cfg.FS, p)
		if !ok {
			continue
		}
		sum := sha256.Sum256(data)
		hash := "sha256:" + hex.EncodeToString(sum[:])
		w.mu.Lock()
		if w.citeHash == nil {
			w.citeHash = map[string]string{}
		}
		if w.citeHash[p] == hash {
			w.mu.Unlock()
			continue
		}
		w.citeHash[p] = hash
		c := record.Citations{Path: p, Hash: hash}
		for _, m := range citeRef.FindAllStringSubmatch(string(data), -1) {
			for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
				if id[0] == 'K' && !slices.Contains(c.Claims, id) {
					c.Claims = append(c.Claims, id)
				} else if id[0] == 'E' && !slices.Contains(c.Evidence, id) {
					c.Evidence = append(c.Evidence, id)
				}
			}
		}
		w.cfg.Log.Append(record.TypeCitations, "runtime", c)
		w.mu.Unlock()
	}
}

// readPlane reads a regular file by plane path, at most maxCiteBytes.
func readPlane(fsys *workspace.FS, planePath string) ([]byte, bool) {
	p, err := fsys.Resolve(planePath)
	if err != nil {
		return nil, false
	}
	f, err := fsys.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCiteBytes))
	return data, err == nil
}

// outputFiles are the regular files under /outputs but scratch, sorted.
func outputFiles(fsys *workspace.FS) []string {
	root, err := fsys.OpenRoot(workspace.Outputs)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && p == "scratch":
			return fs.SkipDir
		case d.Type().IsRegular() && len(out) < 200:
			out = append(out, "/outputs/"+p)
		}
		return nil
	})
	return out
}
