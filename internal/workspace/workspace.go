// Package workspace maps the three planes the agent sees (/inputs, /workspace,
// /outputs; SPEC R-PLANE-1) onto host directories, and keeps the file state F
// of W_t as stat-based snapshots and per-step deltas.
//
// Guarantees:
//   - a Path returned by Resolve or ResolveWrite names a location inside the
//     host root of its plane at the time of the call: ".." never climbs out,
//     and symbolic links are followed the way the sandbox would see them
//     (absolute targets are plane paths) but only while they stay in the
//     plane they started in;
//   - /inputs is never writable; /outputs is writable only where the
//     OutputsWrite hook allows it (nil: nowhere), asked by ResolveWrite and
//     again by WriteFile with the new size; ResolveWrite also refuses a
//     final symlink, a directory, a non-regular file and a file with more
//     than one hard link;
//   - Resolve, ResolveWrite, Open, Hash and WriteFile look at and touch the
//     host only through os.Root (WriteFile through hostfs), so a link
//     swapped in after Resolve still cannot lead outside the plane's root,
//     Hash never follows a final link (W6), and none blocks on a FIFO;
//     WriteFile replaces a file atomically (temporary file and rename), so a
//     reader or a killed run never sees it half-written;
//   - every refusal matches ErrRefused and its text tells the model what to
//     do instead.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/apodex/apodex/internal/watch"
)

// Plane names.
const (
	Inputs    = "inputs"
	Workspace = "workspace"
	Outputs   = "outputs"
)

// planes in the order they are searched and listed.
var planes = []string{Inputs, Workspace, Outputs}

// ErrRefused is matched by every error about a path the agent may not use.
var ErrRefused = errors.New("workspace: path refused")

type refusedError struct {
	msg string
	err error // the hook's error, if it refused
}

func (e *refusedError) Error() string        { return e.msg }
func (e *refusedError) Is(target error) bool { return target == ErrRefused }
func (e *refusedError) Unwrap() error        { return e.err }

func refuse(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// maxLinks bounds how many symbolic links one resolution follows.
const maxLinks = 40

// FS is the three planes of one agent. The host directories must exist and
// be absolute. An FS must not be copied after first use.
type FS struct {
	Inputs, Workspace, Outputs string // host directories (absolute)
	// OutputsWrite decides writes under /outputs, given the plane path of the
	// file (links resolved) and its new size in bytes, or -1 when
	// ResolveWrite asks before the size is known; nil refuses them all.
	OutputsWrite func(planePath string, size int64) error
	// Upper, when set, is the host directory of the overlay upper layer
	// /workspace is the merged view of (a world rollout's): a file not in
	// it is the read-only lower layer's, whose other hard links (the world
	// store, earlier rollouts' terminal workspaces) are outside this
	// workspace; a write copies it up and never changes them.
	Upper string
	// Shared, when set, is the host directory of the shared workspace this
	// FS's /workspace is a private copy-on-write view of (see Changes).
	Shared string
	// Own, when set, is the only part of /workspace this agent may write
	// (a relative directory, e.g. "A1"): the shared isolation's disjoint
	// path convention (R-PLANE-2). The rest of /workspace stays readable.
	Own string
	// ReadOnly makes every plane read-only, in the sandbox too (the
	// verifier's bash, R-VERIFY-1); ResolveWrite refuses every write.
	ReadOnly bool
	// Watch is the Set the planes' trees are watched in (package watch),
	// which a run's session owns and closes; nil: the FS makes one of its
	// own when first asked, and Release closes it.
	Watch *watch.Set

	mu     sync.Mutex
	ownSet *watch.Set                      // made by Trees when Watch is nil
	hashes map[string]map[string]hashEntry // plane -> rel -> last hash, see snapshot.go
	marks  []*Mark                         // open, see track.go
}

// View returns a new FS over the same host directories whose /outputs
// writes are decided by outputsWrite: one view per agent, so the gate knows
// who is writing.
func (w *FS) View(outputsWrite func(planePath string, size int64) error) *FS {
	return &FS{Inputs: w.Inputs, Workspace: w.Workspace, Outputs: w.Outputs, OutputsWrite: outputsWrite, Own: w.Own, Shared: w.Shared, Upper: w.Upper, ReadOnly: w.ReadOnly, Watch: w.Trees()}
}

// Path is a resolved location.
type Path struct {
	Plane     string // Inputs, Workspace or Outputs
	Rel       string // slash-separated, relative to the plane root; "" is the root
	PlanePath string // as the agent sees it: "/workspace/a/b"
	Host      string // the host file name
}

// Roots lists the plane roots as the agent sees them.
func Roots() []string { return []string{"/inputs", "/workspace", "/outputs"} }

const allowedRoots = "use a path under /inputs (read-only), /workspace or /outputs; relative paths are taken from /workspace"

// Root returns the host directory of a plane ("" for an unknown plane).
func (w *FS) Root(plane string) string {
	switch plane {
	case Inputs:
		return w.Inputs
	case Workspace:
		return w.Workspace
	case Outputs:
		return w.Outputs
	}
	return ""
}

// Resolve maps a path the agent gave to read or list.
func (w *FS) Resolve(p string) (Path, error) {
	plane, rel, err := split(p)
	if err != nil {
		return Path{}, err
	}
	rel, err = w.follow(p, plane, rel)
	if err != nil {
		return Path{}, err
	}
	return w.path(plane, rel), nil
}

// ResolveWrite maps a path the agent gave to create or replace a file.
func (w *FS) ResolveWrite(p string) (Path, error) {
	plane, rel, err := split(p)
	if err != nil {
		return Path{}, err
	}
	if w.ReadOnly {
		return Path{}, refuse("cannot write %s: this agent only reads (a verifier checks, it does not change the planes)", "/"+plane+"/"+rel)
	}
	if plane == Inputs {
		return Path{}, refuse("cannot write %s: /inputs is read-only; write your files under /workspace (deliverables under /outputs)", "/"+plane+"/"+rel)
	}
	if rel == "" {
		return Path{}, refuse("cannot write %s: it is a plane directory; give a file name under it", "/"+plane)
	}
	dir, err := w.follow(p, plane, path.Dir(rel))
	if err != nil {
		return Path{}, err
	}
	rel = path.Join(dir, path.Base(rel))
	out := w.path(plane, rel)
	root, err := os.OpenRoot(w.Root(plane))
	if err != nil {
		return Path{}, refuse("cannot write %s: %v", out.PlanePath, unwrapPathError(err))
	}
	defer root.Close()
	fi, err := root.Lstat(rel) // never through a link swapped in since follow
	if errors.Is(err, syscall.ENOTDIR) {
		err = fs.ErrNotExist // a missing parent is created; a file parent fails there
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Path{}, refuse("cannot write %s: %v", out.PlanePath, unwrapPathError(err))
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := root.Readlink(rel)
		return Path{}, refuse("cannot write %s: it is a symbolic link (to %s); write to the file it points to instead", out.PlanePath, target)
	case fi.IsDir():
		return Path{}, refuse("cannot write %s: it is a directory; give a file name", out.PlanePath)
	case !fi.Mode().IsRegular():
		return Path{}, refuse("cannot write %s: it is not a regular file (%s)", out.PlanePath, fi.Mode().Type())
	case w.sharedLinks(out, fi):
		return Path{}, refuse("cannot write %s: it has %d hard links, and writing it would change the other names too; write a new file instead", out.PlanePath, linkCount(fi))
	}
	if err := w.allowOutputs(out, -1); err != nil {
		return Path{}, err
	}
	if out.Plane == Workspace && w.Own != "" && out.Rel != w.Own && !strings.HasPrefix(out.Rel, w.Own+"/") {
		return Path{}, refuse("cannot write %s: in the shared workspace you may write only under /workspace/%s/ (the others' directories are readable)", out.PlanePath, w.Own)
	}
	return out, nil
}

// allowOutputs asks the OutputsWrite hook about a write under /outputs.
func (w *FS) allowOutputs(p Path, size int64) error {
	if p.Plane != Outputs {
		return nil
	}
	if w.OutputsWrite == nil {
		return refuse("cannot write %s: /outputs is read-only in this run; write your files under /workspace", p.PlanePath)
	}
	if err := w.OutputsWrite(p.PlanePath, size); err != nil {
		return &refusedError{msg: err.Error(), err: err}
	}
	return nil
}

func (w *FS) path(plane, rel string) Path {
	pp := "/" + plane
	host := w.Root(plane)
	if rel != "" {
		pp += "/" + rel
		host = filepath.Join(host, filepath.FromSlash(rel))
	}
	return Path{Plane: plane, Rel: rel, PlanePath: pp, Host: host}
}

// split cleans an agent path and finds its plane, lexically.
func split(p string) (plane, rel string, err error) {
	switch {
	case strings.TrimSpace(p) == "":
		return "", "", refuse("path is empty: %s", allowedRoots)
	case strings.ContainsRune(p, 0):
		return "", "", refuse("path %q contains a NUL byte", p)
	}
	abs := p
	if !strings.HasPrefix(abs, "/") {
		abs = "/workspace/" + abs
	}
	clean := path.Clean(abs)
	plane, rel, ok := planeOf(clean)
	if !ok {
		if containsDotDot(p) {
			return "", "", refuse("path %q climbs out of the planes with \"..\" (it means %s): %s", p, clean, allowedRoots)
		}
		return "", "", refuse("path %q is outside the planes: %s", p, allowedRoots)
	}
	return plane, rel, nil
}

// planeOf splits a clean absolute plane path.
func planeOf(clean string) (plane, rel string, ok bool) {
	for _, pl := range planes {
		root := "/" + pl
		if clean == root {
			return pl, "", true
		}
		if strings.HasPrefix(clean, root+"/") {
			return pl, clean[len(root)+1:], true
		}
	}
	return "", "", false
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// follow resolves the symbolic links in rel, component by component, the way
// the sandbox sees them, and refuses a link that leaves plane. Components that
// do not exist are kept as they are.
func (w *FS) follow(orig, plane, rel string) (string, error) {
	root := w.Root(plane)
	if root == "" {
		return "", refuse("plane /%s is not configured", plane)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", refuse("cannot use %s: plane /%s: %v", orig, plane, unwrapPathError(err))
	}
	defer r.Close()
	var done []string // resolved components, all existing directories
	todo := strings.Split(rel, "/")
	if rel == "" || rel == "." {
		todo = nil
	}
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		cur := append(done, c)
		name := strings.Join(cur, "/")
		fi, err := r.Lstat(name) // inside the plane's root, whatever is swapped in meanwhile
		if errors.Is(err, fs.ErrNotExist) {
			return strings.Join(append(cur, todo...), "/"), nil
		}
		if err != nil {
			return "", refuse("cannot use %s: %v", orig, unwrapPathError(err))
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if len(todo) > 0 && !fi.IsDir() {
				return "", refuse("cannot use %s: /%s/%s is a file, not a directory", orig, plane, strings.Join(cur, "/"))
			}
			done = cur
			continue
		}
		links++
		if links > maxLinks {
			return "", refuse("cannot use %s: too many levels of symbolic links", orig)
		}
		target, err := r.Readlink(name)
		if err != nil {
			return "", refuse("cannot use %s: %v", orig, unwrapPathError(err))
		}
		linkPath := "/" + plane + "/" + strings.Join(cur, "/")
		next := target
		if !strings.HasPrefix(target, "/") {
			next = path.Join("/"+plane, strings.Join(done, "/"), target)
		}
		next = path.Clean(next)
		tplane, trel, ok := planeOf(next)
		if !ok || tplane != plane {
			hint := fmt.Sprintf("links may only point inside /%s", plane)
			if ok {
				hint = fmt.Sprintf("use the path %s directly", path.Join(next, strings.Join(todo, "/")))
			}
			return "", refuse("cannot use %s: %s is a symbolic link to %s, which is outside /%s; %s", orig, linkPath, target, plane, hint)
		}
		done = nil
		if trel != "" {
			todo = append(strings.Split(trel, "/"), todo...)
		}
	}
	return strings.Join(done, "/"), nil
}

// unwrapPathError drops the host file name from an *fs.PathError, which the
// agent must not see.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
