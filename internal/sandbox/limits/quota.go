package limits

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// quotaPoll is how often quotas are measured during a command (at most).
var quotaPoll = 100 * time.Millisecond

// Usage measures dir: allocated bytes (or, apparent, regular files' sizes)
// and entries below it.
func Usage(dir string, apparent bool) (bytes, files int64) {
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

// UsageOf measures a mount: from its watched tree when it has one.
func UsageOf(m spec.Mount) (bytes, files int64) {
	if m.Watch != nil {
		if t, err := m.Watch.For(m.Source); err == nil {
			blocks, apparent, n := t.Usage()
			if m.Quota != nil && m.Quota.Apparent {
				return apparent, n
			}
			return blocks, n
		}
	}
	return Usage(m.Source, m.Quota != nil && m.Quota.Apparent)
}

// QuotaWatch measures the quota mounts of a command.
type QuotaWatch struct {
	ms    []spec.Mount
	idx   []int // index of each in the command's mounts
	start [][2]int64
}

// NewQuotaWatch watches the mounts with a quota, whose usage at the start
// is in start (by index in ms).
func NewQuotaWatch(ms []spec.Mount, start Tally) *QuotaWatch {
	w := &QuotaWatch{}
	for i, m := range ms {
		if m.Writable && m.Quota != nil && (m.Quota.Bytes > 0 || m.Quota.Files > 0) {
			w.ms, w.idx, w.start = append(w.ms, m), append(w.idx, i), append(w.start, start[i])
		}
	}
	return w
}

// check measures the mounts and returns the first the command grew past
// its quota, and how.
func (w *QuotaWatch) check() (spec.Mount, string) {
	for i, m := range w.ms {
		b, f := UsageOf(m)
		if why := m.Quota.Over(b, f); why != "" && (b > w.start[i][0] || f > w.start[i][1]) {
			return m, why
		}
	}
	return spec.Mount{}, ""
}

// Final returns the first mount over its quota at the end, by the usage in
// end (by index in the command's mounts), and how.
func (w *QuotaWatch) Final(end Tally) (spec.Mount, string) {
	for i, m := range w.ms {
		u := end[w.idx[i]]
		if why := m.Quota.Over(u[0], u[1]); why != "" {
			return m, why
		}
	}
	return spec.Mount{}, ""
}

// Run polls until stop closes, calling kill once a quota is exceeded. The
// pause between measurements is quotaPoll, or ten times the last
// measurement when that took longer, so a large tree costs at most a tenth
// of a core.
func (w *QuotaWatch) Run(stop <-chan struct{}, kill func(spec.Mount, string)) {
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
