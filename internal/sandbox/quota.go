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
// measurements is kept and reported in Result.Limit; preallocation cannot
// outrun a measurement, the seccomp filter refusing fallocate. Nothing
// already written is removed. With Refuse, the bytes are a hard bound instead: the command
// writes into a sized overlay (overlay_linux.go) and a write past what is
// left fails in the command; what it wrote is kept.
type Quota struct {
	Bytes int64
	Files int64
	// Apparent counts Bytes as the sizes of the regular files instead of
	// the blocks allocated (the publication plane's scratch quota).
	Apparent bool
	// Refuse makes Bytes a hard bound for the command (a sized overlay of
	// the mount) where the kernel allows it.
	Refuse bool
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

// usageOf measures a mount: from its watched tree when it has one.
func usageOf(m Mount) (bytes, files int64) {
	if m.Watch != nil {
		if t, err := m.Watch.For(m.Source); err == nil {
			blocks, apparent, n := t.Usage()
			if m.Quota != nil && m.Quota.Apparent {
				return apparent, n
			}
			return blocks, n
		}
	}
	return usage(m.Source, m.Quota != nil && m.Quota.Apparent)
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
	idx   []int // index of each in the command's mounts
	start [][2]int64
}

// newQuotaWatch watches the mounts with a quota, whose usage at the start
// is in start (by index in ms).
func newQuotaWatch(ms []Mount, start tally) *quotaWatch {
	w := &quotaWatch{}
	for i, m := range ms {
		if m.Writable && m.Quota != nil && (m.Quota.Bytes > 0 || m.Quota.Files > 0) {
			w.ms, w.idx, w.start = append(w.ms, m), append(w.idx, i), append(w.start, start[i])
		}
	}
	return w
}

// check measures the mounts and returns the first the command grew past
// its quota, and how.
func (w *quotaWatch) check() (Mount, string) {
	for i, m := range w.ms {
		b, f := usageOf(m)
		if why := m.Quota.over(b, f); why != "" && (b > w.start[i][0] || f > w.start[i][1]) {
			return m, why
		}
	}
	return Mount{}, ""
}

// final returns the first mount over its quota at the end, by the usage in
// end (by index in the command's mounts), and how.
func (w *quotaWatch) final(end tally) (Mount, string) {
	for i, m := range w.ms {
		u := end[w.idx[i]]
		if why := m.Quota.over(u[0], u[1]); why != "" {
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
			if m, why := w.check(); why != "" {
				kill(m, why)
				return
			}
			wait = max(quotaPoll, 10*time.Since(begin))
		}
	}
}
