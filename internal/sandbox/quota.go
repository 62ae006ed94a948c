package sandbox

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// Quota bounds what a writable mount may hold: allocated bytes (blocks on
// disk, so a sparse file counts what it really uses) and entries (files,
// directories, links). Zero fields are unlimited. The runner measures the
// mount while the command runs (every quotaPoll) and kills the command once
// it grows a mount past its quota; a write that fits between two
// measurements is kept and reported in Result.Limit. Nothing already written
// is removed.
type Quota struct {
	Bytes int64
	Files int64
	// Apparent counts Bytes as the sizes of the regular files instead of
	// the blocks allocated (the publication plane's scratch quota).
	Apparent bool
	// Name is the limit's name in Result.Limit and Hint says how to raise
	// it, e.g. "--workspace-quota".
	Name, Hint string
}

// Defaults of the workspace quota (Limits.Workspace).
const (
	DefaultWorkspaceBytes = 10 << 30
	DefaultWorkspaceFiles = 1_000_000
)

// quotaPoll is how often quotas are measured during a command (at most).
var quotaPoll = 100 * time.Millisecond

// usage measures dir: allocated bytes (or, apparent, regular files' sizes)
// and entries below it.
func usage(dir string, apparent bool) (bytes, files int64) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		files++
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && !apparent {
				bytes += st.Blocks * 512
			} else if apparent && fi.Mode().IsRegular() {
				bytes += fi.Size()
			}
		}
		return nil
	})
	return bytes, files
}

// over says how m is over its quota ("" if it is not).
func (q Quota) over(bytes, files int64) string {
	switch {
	case q.Bytes > 0 && bytes > q.Bytes:
		what := "allocated"
		if q.Apparent {
			what = "in files"
		}
		return fmt.Sprintf("%s of %s %s", human(bytes), human(q.Bytes), what)
	case q.Files > 0 && files > q.Files:
		return fmt.Sprintf("%d of %d files", files, q.Files)
	}
	return ""
}

// quotaWatch measures the quota mounts of a command.
type quotaWatch struct {
	ms    []Mount
	start [][2]int64
}

func newQuotaWatch(ms []Mount) *quotaWatch {
	w := &quotaWatch{}
	for _, m := range ms {
		if m.Writable && m.Quota != nil && (m.Quota.Bytes > 0 || m.Quota.Files > 0) {
			b, f := usage(m.Source, m.Quota.Apparent)
			w.ms = append(w.ms, m)
			w.start = append(w.start, [2]int64{b, f})
		}
	}
	return w
}

// check returns the first mount the command grew past its quota (or that
// is over it at the end, when final) and how.
func (w *quotaWatch) check(final bool) (Mount, string) {
	for i, m := range w.ms {
		b, f := usage(m.Source, m.Quota.Apparent)
		why := m.Quota.over(b, f)
		grew := b > w.start[i][0] || f > w.start[i][1]
		if why != "" && (grew || final) {
			return m, why
		}
	}
	return Mount{}, ""
}

// run polls until stop closes, calling kill once a quota is exceeded. The
// pause between measurements is quotaPoll, or ten times the last
// measurement when that took longer, so a large tree costs at most a tenth
// of a core.
func (w *quotaWatch) run(stop <-chan struct{}, kill func(Mount, string)) {
	if len(w.ms) == 0 {
		return
	}
	wait := quotaPoll
	for {
		select {
		case <-stop:
			return
		case <-time.After(wait):
			begin := time.Now()
			if m, why := w.check(false); why != "" {
				kill(m, why)
				return
			}
			wait = max(quotaPoll, 10*time.Since(begin))
		}
	}
}
