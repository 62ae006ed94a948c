// Package runlog is a run's own log (`--log-level`): JSON lines from
// log/slog in apodex.log in the run directory.
//
// Guarantees:
//   - nothing is created before the run creates its directory: lines
//     logged earlier are held in memory and written first, in order, once
//     the directory exists; a run that never starts leaves no directory
//     and no file behind;
//   - the log is for people debugging; the record, not the log, is the
//     source of truth.
package runlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ParseLevel reads a level name: debug, info (or ""), warn or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
}

// File is the log's name in the run directory.
const File = "apodex.log"

// New is a JSON log at lvl to File in dir, and the func that closes it.
func New(dir string, lvl slog.Level) (*slog.Logger, func()) {
	w := &dirFile{path: filepath.Join(dir, File)}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), w.close
}

// dirFile appends to path once path's directory exists; before, it buffers.
type dirFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	buf  bytes.Buffer
}

func (d *dirFile) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		if _, err := os.Stat(filepath.Dir(d.path)); err != nil {
			return d.buf.Write(p)
		}
		f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return d.buf.Write(p)
		}
		d.f = f
		d.f.Write(d.buf.Bytes())
		d.buf.Reset()
	}
	return d.f.Write(p)
}

func (d *dirFile) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil && d.buf.Len() > 0 {
		if _, err := os.Stat(filepath.Dir(d.path)); err == nil {
			os.WriteFile(d.path, d.buf.Bytes(), 0o644)
		}
	}
	if d.f != nil {
		d.f.Close()
	}
}
