package runstate_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// lastLine is the record's last line, without its newline.
func lastLine(t *testing.T, dir string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	body := data[:len(data)-1]
	return body[bytes.LastIndexByte(body, '\n')+1:]
}

// The boundary of a record whose last line is megabytes long (a
// run_finished listing thousands of files, read back far more than one
// 64 KiB window) is that line's end, length and hash, as of a short one;
// a record written in another form (keys in another order) has its
// boundary too; a record whose last line changed after the fold has none.
func TestBoundaryOfALongLastLine(t *testing.T) {
	for _, files := range []int{0, 1, 30000} {
		dir := t.TempDir()
		log, err := record.Create(dir, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		log.Append(record.TypeWarning, "", record.Warning{Code: "x", Message: "before"})
		fin := record.RunFinished{Termination: "completed", Status: "completed"}
		for i := range files {
			fin.Files = append(fin.Files, record.FileEntry{Path: fmt.Sprintf("/workspace/d%03d/f%06d.py", i/100, i), SHA256: "sha256:" + hex.EncodeToString(make([]byte, 32)), Bytes: int64(i)})
		}
		if _, err := log.Append(record.TypeRunFinished, "", fin); err != nil {
			t.Fatal(err)
		}
		log.Close()
		l, err := runstate.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		line := lastLine(t, dir)
		fi, _ := os.Stat(filepath.Join(dir, record.EventsFile))
		sum := sha256.Sum256(line)
		want := runstate.Boundary{End: fi.Size(), LastLen: len(line) + 1, LastHash: "sha256:" + hex.EncodeToString(sum[:])}
		if got, ok, err := l.Boundary(); !ok || err != nil || got != want {
			t.Errorf("%d files (a last line of %d bytes): got %+v %v %v, want %+v", files, len(line), got, ok, err, want)
		}
		f, _ := os.Open(filepath.Join(dir, record.EventsFile))
		if !want.Holds(f) {
			t.Errorf("%d files: the record does not hold its own boundary", files)
		}
		f.Close()
		// The same length, another seq: the record moved under the fold.
		data, _ := os.ReadFile(filepath.Join(dir, record.EventsFile))
		os.WriteFile(filepath.Join(dir, record.EventsFile), bytes.Replace(data, []byte(`{"seq":2,`), []byte(`{"seq":7,`), 1), 0o644)
		if b, ok, _ := l.Boundary(); ok {
			t.Errorf("%d files: a last line of another seq gave the boundary %+v", files, b)
		}
	}
	// Lines in another form than apodex's (keys in another order, space
	// around a line): decoded whole, the hash of the line trimmed as the
	// chain hashes it, its length as it is.
	first := `{"type":"warning","seq":1,"time":"2026-01-01T00:00:00Z","agent":"","code":"x","message":"a"}` + "\n"
	for what, last := range map[string]string{
		"keys in another order": `{"type":"warning","time":"2026-01-01T00:00:01Z","agent":"","code":"x","message":"b","seq":2}`,
		"a carriage return":     `{"seq":2,"time":"2026-01-01T00:00:01Z","type":"warning","agent":"","code":"x","message":"b"}` + "\r",
		"a leading space":       ` {"seq":2,"time":"2026-01-01T00:00:01Z","type":"warning","agent":"","code":"x","message":"b"}`,
	} {
		dir := t.TempDir()
		lines := first + last + "\n"
		os.WriteFile(filepath.Join(dir, record.EventsFile), []byte(lines), 0o644)
		l, err := runstate.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(bytes.TrimSpace([]byte(last)))
		want := runstate.Boundary{End: int64(len(lines)), LastLen: len(last) + 1, LastHash: "sha256:" + hex.EncodeToString(sum[:])}
		if got, ok, err := l.Boundary(); !ok || err != nil || got != want {
			t.Errorf("%s: got %+v %v %v, want %+v", what, got, ok, err, want)
		}
	}
}
