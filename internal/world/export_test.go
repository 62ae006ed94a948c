package world

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/watch"
)

// Counters for tests: files hashed (hashFile) and moved out of an upper
// layer (Finish) so far in this process.
func Hashed() int64 { return hashed.Load() }
func Moved() int64  { return moved.Load() }

// Known is w's seed for the watch of its rollouts' workspaces.
func Known(w *World) func(rel string, e watch.Entry) (watch.Sum, bool) { return w.known }

// PrefillOf is what w's rollouts' watches are filled from.
func PrefillOf(w *World) (watch.Prefill, bool) { return w.prefill() }

// WriteSealV1 replaces w's seal by a v1 one (what worlds stored before v2
// have): directories as v2 has them, each file's full stat, no owner.
func WriteSealV1(w *World) error {
	rec := w.readSeal()
	if rec == nil {
		return errors.New("no seal")
	}
	var buf bytes.Buffer
	buf.WriteString(sealMagicV1)
	binary.Write(&buf, binary.LittleEndian, uint64(len(rec.dirs)))
	for _, d := range rec.dirs {
		binary.Write(&buf, binary.LittleEndian, uint64(len(d.rel)))
		buf.WriteString(d.rel)
		binary.Write(&buf, binary.LittleEndian, d.st)
	}
	binary.Write(&buf, binary.LittleEndian, uint64(len(w.Files)))
	for _, f := range w.Files {
		s, err := lstatSeal(filepath.Join(w.Dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		binary.Write(&buf, binary.LittleEndian, s)
	}
	p := filepath.Join(w.Dir, sealFile)
	os.Chmod(p, 0o644)
	defer os.Chmod(p, 0o444)
	return os.WriteFile(p, buf.Bytes(), 0o444)
}
