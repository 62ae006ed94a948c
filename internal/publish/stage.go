package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool/builtin"
)

// BashMounts returns the builtin.Env Outputs hook for agent's bash commands
// (R-SBX-3). A non-holder gets /outputs read-only and /outputs/scratch
// writable. The holder gets a fresh copy of /outputs (without scratch) bound
// writable, and when the command ends the declared paths it changed are
// committed; see the package doc.
func (p *Plane) BashMounts(agent string) func(ctx context.Context) (builtin.OutputsView, error) {
	return func(ctx context.Context) (builtin.OutputsView, error) { return p.view(ctx, agent) }
}

func (p *Plane) view(ctx context.Context, agent string) (builtin.OutputsView, error) {
	if err := p.ensureScratch(); err != nil {
		return builtin.OutputsView{}, err
	}
	scratch := sandbox.Mount{Source: p.scratch, Target: "/outputs/scratch", Writable: true, Watch: p.cfg.Watch,
		Quota: &sandbox.Quota{Bytes: p.cfg.ScratchQuota, Apparent: true, Refuse: true, Name: "scratch_quota", Hint: "--scratch-quota"}}
	p.mu.Lock()
	holder, held := p.holder, slices.Clone(p.held)
	p.mu.Unlock()
	if holder != agent {
		hint := "/outputs is read-only without the publishing lease: call claim_outputs with the exact paths you will deliver, then run the command again; /outputs/scratch/ is writable for intermediate files"
		if holder != "" {
			hint = fmt.Sprintf("/outputs is read-only: the publishing lease is held by %s; wait until it finishes, or write intermediate files under /outputs/scratch/", holder)
		}
		return builtin.OutputsView{
			Mounts: []sandbox.Mount{{Source: p.cfg.Outputs, Target: "/outputs"}, scratch},
			Hint:   hint,
			After:  func(bool) string { return note(p.quotaNote()) },
		}, nil
	}
	st, err := p.stage(ctx, agent, held)
	if err != nil {
		return builtin.OutputsView{}, err
	}
	var once sync.Once
	return builtin.OutputsView{
		Mounts: []sandbox.Mount{{Source: st.dir, Target: "/outputs", Writable: true, Fresh: true}, scratch},
		After: func(killed bool) (out string) {
			once.Do(func() { out = strings.TrimSuffix(p.commit(st, killed)+"\n"+note(p.quotaNote()), "\n") })
			return out
		},
	}, nil
}

func note(s string) string {
	if s == "" {
		return ""
	}
	return "note: " + s
}

// staging is the holder's private copy of /outputs for one command.
type staging struct {
	agent    string
	dir      string
	declared []string         // plane paths, as held when the command started
	before   map[string]state // rel -> what the copy held (not directories)
}

// stage copies the real outputs tree, without scratch, into a new
// directory under Config.Staging, with an empty scratch mount point.
func (p *Plane) stage(ctx context.Context, agent string, declared []string) (*staging, error) {
	dir, err := os.MkdirTemp(p.cfg.Staging, "outputs-")
	if err != nil {
		return nil, fmt.Errorf("publish: staging: %w", err)
	}
	st := &staging{agent: agent, dir: dir, declared: declared, before: map[string]state{}}
	err = os.Chmod(dir, 0o755)
	if err == nil {
		err = copyTree(ctx, p.cfg.Outputs, dir, st.before)
	}
	if err == nil {
		err = os.Mkdir(dir+"/scratch", 0o755)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("publish: copy /outputs for the command: %w", err)
	}
	return st, nil
}

// copyTree copies directories, regular files and symbolic links (as links)
// from src to the empty dst, skipping src/scratch, and records what it
// copied in seen. An entry that is gone by the time it is copied (a file
// tool's temporary file, renamed into place meanwhile) was not there.
func copyTree(ctx context.Context, src, dst string, seen map[string]state) error {
	sr, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer sr.Close()
	dr, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer dr.Close()
	return fs.WalkDir(sr.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && name != "." && errors.Is(err, fs.ErrNotExist):
			return nil // gone since its directory was read
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case name == ".":
			return nil
		case name == "scratch":
			return fs.SkipDir
		case d.IsDir():
			return dr.Mkdir(name, 0o755)
		}
		fi, err := d.Info()
		// A file replaced while it is copied is copied again, as it is now.
		for try := 0; ; try++ {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			s := describe(sr, name, fi, nil)
			switch s.kind {
			case kindLink:
				err = dr.Symlink(s.target, name)
			case kindFile:
				err = copyFile(sr, dr, name, fi, s.perm)
				s.links = 1
			case kindOther:
				if errors.Is(s.err, errChanged) && try < 3 {
					fi, err = sr.Lstat(name)
					continue
				}
				return nil // special files (and one that keeps changing) are not copied
			default:
				return nil
			}
			if errors.Is(err, errChanged) && try < 3 {
				_ = dr.Remove(name)
				fi, err = sr.Lstat(name)
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			seen[name] = s
			return err
		}
	})
}

// copyFile copies the regular file name (lstat fi) from sr to a new file in
// dr.
func copyFile(sr, dr *os.Root, name string, fi fs.FileInfo, perm fs.FileMode) error {
	in, err := openAt(sr, name, fi)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer in.Close()
	out, err := dr.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err = errors.Join(err, out.Close()); err != nil {
		return err
	}
	// The copy keeps the modification time, so a command that rewrites a
	// file with the same bytes can be told from one that left it alone.
	return dr.Chtimes(name, fi.ModTime(), fi.ModTime())
}

// commit applies the staging copy to the real outputs and removes it. It
// returns what the agent should read ("" when nothing under /outputs
// changed).
func (p *Plane) commit(st *staging, killed bool) string {
	defer os.RemoveAll(st.dir)
	sr, err := os.OpenRoot(st.dir)
	if err != nil {
		return "--- /outputs ---\nnothing under /outputs was kept: " + err.Error()
	}
	defer sr.Close()
	after := walkStates(sr)
	changed := slices.ContainsFunc(st.declared, func(pp string) bool {
		return !look(sr, rel(pp)).same(st.was(pp)) || rewritten(look(sr, rel(pp)), st.was(pp))
	})
	var undeclared, unapplied []string
	for _, r := range unionKeys(st.before, after) {
		b, inBefore := st.before[r]
		a, inAfter := after[r]
		switch {
		case slices.Contains(st.declared, "/outputs/"+r):
		case inBefore && inAfter && a.same(b):
		case inAfter:
			undeclared = append(undeclared, "/outputs/"+r)
		default:
			unapplied = append(unapplied, "/outputs/"+r)
		}
	}
	if !changed && len(undeclared) == 0 && len(unapplied) == 0 {
		return ""
	}
	lines := []string{"--- /outputs ---"}
	if killed {
		return strings.Join(append(lines, "the command did not finish, so nothing it wrote under /outputs was kept (only /outputs/scratch/ is shared); run it again to completion"), "\n")
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holder != st.agent {
		return strings.Join(append(lines, "the publishing lease was released while the command ran, so nothing it wrote under /outputs was kept"), "\n")
	}
	or, err := hostfs.Open(p.cfg.Outputs)
	if err != nil {
		return strings.Join(append(lines, "nothing under /outputs was kept: "+err.Error()), "\n")
	}
	defer or.Close()
	for _, pp := range st.declared {
		line := commitPath(sr, or, pp, st.was(pp))
		if line == "" {
			line = unchangedLine(look(sr, rel(pp)), st.was(pp), pp)
		}
		lines = append(lines, line)
	}
	if len(undeclared) > 0 {
		lines = append(lines, fmt.Sprintf("not delivered: %s %s not in the manifest [%s] and %s not kept; claim with claim_outputs first, then write again",
			list(undeclared, 20), isAre(len(undeclared)), list(st.declared, 20), wasWere(len(undeclared))))
	}
	if len(unapplied) > 0 {
		lines = append(lines, fmt.Sprintf("not applied: deleting %s, which %s not in the manifest", list(unapplied, 20), isAre(len(unapplied))))
	}
	return strings.Join(lines, "\n")
}

// was is what the copy held at pp when the command started.
func (st *staging) was(pp string) state {
	if s, ok := st.before[rel(pp)]; ok {
		return s
	}
	return state{kind: kindAbsent, where: pp}
}

// commitPath applies one declared path; p.mu is held.
func commitPath(sr *os.Root, or *hostfs.Dir, pp string, before state) string {
	r := rel(pp)
	a := look(sr, r)
	if a.same(before) {
		return ""
	}
	cur := look(or.Root(), r)
	switch {
	case a.kind == kindAbsent:
		if cur.kind == kindAbsent {
			return ""
		}
		if cur.kind != kindFile || cur.parent {
			return fmt.Sprintf("not removed: %s: %s %s", pp, cur.where, cur.what())
		}
		if err := or.Remove(r); err != nil {
			return fmt.Sprintf("not removed: %s: %v", pp, unwrap(err))
		}
		return "removed " + pp
	case a.kind == kindFile && !a.parent && a.links > 1:
		return fmt.Sprintf("refused %s: it has %d hard links, and a delivered file must be a file of its own; write its content (cp, a redirect) instead of linking", pp, a.links)
	case !a.deliverable():
		return fmt.Sprintf("refused %s: %s %s; a declared path must be a regular file: write the content itself", pp, a.where, a.what())
	case cur.parent || (cur.kind != kindAbsent && cur.kind != kindFile):
		return fmt.Sprintf("refused %s: in /outputs, %s %s", pp, cur.where, cur.what())
	}
	if dir := path.Dir(r); dir != "." {
		if err := or.MkdirAll(dir, 0o755); err != nil {
			return fmt.Sprintf("refused %s: %v", pp, unwrap(err))
		}
	}
	in, err := openAt(sr, r, a.fi)
	if err != nil {
		return fmt.Sprintf("refused %s: %v", pp, err)
	}
	defer in.Close()
	n, got, err := or.Replace(r, in, a.perm&0o755|0o644, "")
	if err != nil {
		return fmt.Sprintf("refused %s: %v", pp, unwrap(err))
	}
	if got != a.hash {
		return fmt.Sprintf("kept %s (%d bytes), but it changed while being copied", pp, n)
	}
	return fmt.Sprintf("kept %s (%d bytes)", pp, n)
}

// rewritten reports a declared file written again with the bytes it had.
func rewritten(a, before state) bool {
	return a.kind == kindFile && a.same(before) && a.fi != nil && before.fi != nil && !a.fi.ModTime().Equal(before.fi.ModTime())
}

// unchangedLine is the footer line of a declared path the command left as
// it was, so the footer names the state of every declared path.
func unchangedLine(a, before state, pp string) string {
	switch {
	case rewritten(a, before):
		return fmt.Sprintf("unchanged %s (%d bytes): rewritten with identical bytes; it is delivered as it is", pp, a.size)
	case a.kind == kindFile:
		return fmt.Sprintf("unchanged %s (%d bytes)", pp, a.size)
	case a.kind == kindAbsent:
		return fmt.Sprintf("not written yet: %s", pp)
	}
	return fmt.Sprintf("unchanged %s: %s %s", pp, a.where, a.what())
}

// walkStates describes every entry but directories under the root of a
// staging copy, scratch excluded.
func walkStates(r *os.Root) map[string]state {
	out := map[string]state{}
	fs.WalkDir(r.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || name == ".":
			return nil
		case name == "scratch" && d.IsDir():
			return fs.SkipDir
		case d.IsDir():
			return nil
		}
		fi, err := d.Info()
		out[name] = describe(r, name, fi, err)
		return nil
	})
	return out
}

func unionKeys(a, b map[string]state) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
