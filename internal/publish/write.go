package publish

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CheckWrite decides whether agent may write planePath (links already
// resolved) with size bytes (-1: not known yet) through the file tools. It
// is the workspace.FS OutputsWrite hook:
//
//	fs.OutputsWrite = func(pp string, size int64) error { return plane.CheckWrite(agent, pp, size) }
//
// The holder's declared paths are written in the real outputs directory;
// the workspace refuses links, directories and hard-linked files there.
func (p *Plane) CheckWrite(agent, planePath string, size int64) error {
	if planePath != "/outputs" && !strings.HasPrefix(planePath, "/outputs/") {
		return refuse(ErrUndeclared, "cannot write %s: not a path under /outputs", planePath)
	}
	switch r := rel(planePath); {
	case r == "scratch" || planePath == "/outputs":
		return refuse(ErrUndeclared, "cannot write %s: it is a directory; give a file name under /outputs/scratch/", planePath)
	case strings.HasPrefix(r, "scratch/"):
		return p.checkScratch(planePath, strings.TrimPrefix(r, "scratch/"), size)
	}
	p.mu.Lock()
	holder, held := p.holder, slices.Clone(p.held)
	p.mu.Unlock()
	switch {
	case holder == "":
		return refuse(ErrNoLease, "cannot write %s: /outputs is read-only without the publishing lease: call claim_outputs with the exact paths you will deliver (intermediate files may go under /outputs/scratch/)", planePath)
	case holder != agent:
		return refuse(ErrNoLease, "cannot write %s: /outputs is read-only: the publishing lease is held by %s; wait until it finishes, or write intermediate files under /outputs/scratch/", planePath, holder)
	case !slices.Contains(held, planePath):
		return refuse(ErrUndeclared, "cannot write %s: it is not in your manifest [%s]; claim it with claim_outputs first (or write intermediate files under /outputs/scratch/)", planePath, list(held, 20))
	}
	return nil
}

// checkScratch applies the quota to a write of size bytes at scratch-relative
// path r.
func (p *Plane) checkScratch(planePath, r string, size int64) error {
	used := p.ScratchUsage()
	quota := p.cfg.ScratchQuota
	if used > quota {
		return refuse(ErrQuota, "cannot write %s: scratch quota exceeded: %d of %d bytes used; delete files under /outputs/scratch (with bash) before writing more", planePath, used, quota)
	}
	if size < 0 {
		return nil
	}
	var old int64
	if root, err := os.OpenRoot(p.scratch); err == nil { // never a stat through an agent's link
		if fi, err := root.Lstat(r); err == nil && fi.Mode().IsRegular() {
			old = fi.Size()
		}
		root.Close()
	}
	if after := used - old + size; after > quota {
		return refuse(ErrQuota, "cannot write %s (%d bytes): it would bring scratch to %d bytes, over its quota of %d (%d used now); delete files under /outputs/scratch or write less", planePath, size, after, quota, used)
	}
	return nil
}

// ScratchUsage is the total size of the regular files under /outputs/scratch.
func (p *Plane) ScratchUsage() int64 {
	var n int64
	filepath.WalkDir(p.scratch, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// quotaNote says so when scratch is over its quota ("" otherwise).
func (p *Plane) quotaNote() string {
	if used := p.ScratchUsage(); used > p.cfg.ScratchQuota {
		return fmt.Sprintf("scratch quota exceeded: %d of %d bytes used; delete files under /outputs/scratch (further scratch writes are refused until then)", used, p.cfg.ScratchQuota)
	}
	return ""
}
