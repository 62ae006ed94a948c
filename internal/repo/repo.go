// Package repo puts a host directory tree (a repository) in a run's
// /workspace and brings the run's change back out.
//
// The view is a copy taken when the run starts — the repository itself is
// never written while the run lasts — together with a baseline: every
// copied file's path, mode and sha256, its content kept by the caller by
// hash (the run's blobs). Changes compares the baseline with the workspace
// as it is; Diff prints them in git's unified format; Apply writes them to
// a tree, all or nothing, refusing any file that changed there since the
// baseline was taken.
//
// Only regular files are in the view: symbolic links, devices and empty
// directories are left out. For a git checkout the view is the files git
// lists (tracked, plus untracked ones not ignored) without .git; All takes
// every file, .git included.
package repo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is one file of the baseline.
type Entry struct {
	Path   string `json:"path"` // slash-separated, relative to the tree's root
	SHA256 string `json:"sha256"`
	Mode   uint32 `json:"mode"` // 0o644 or 0o755
	Size   int64  `json:"size"`
}

// Baseline is the tree as the run started from it.
type Baseline struct {
	Dir   string  `json:"dir"`           // the host tree, absolute
	Git   bool    `json:"git,omitempty"` // a git checkout: ignored files stay out
	All   bool    `json:"all,omitempty"` // every file, ignored ones and .git included
	Files []Entry `json:"files"`
}

// Blobs stores and loads file contents by sha256 (hex).
type Blobs interface {
	Put(data []byte) (sha string, err error)
	Get(sha string) ([]byte, error)
}

// IsGit reports whether dir is the root of a git work tree (and git is
// installed).
func IsGit(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return false
	}
	top, err1 := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	d, err2 := filepath.EvalSymlinks(dir)
	return err1 == nil && err2 == nil && top == d
}

// List returns the paths of dir that are in the view, sorted.
func List(dir string, all bool) (paths []string, git bool, err error) {
	if !all && IsGit(dir) {
		out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
		if err != nil {
			return nil, true, fmt.Errorf("repo: git ls-files in %s: %w", dir, err)
		}
		seen := map[string]bool{}
		for _, p := range strings.Split(string(out), "\x00") {
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			if st, err := os.Lstat(filepath.Join(dir, p)); err == nil && st.Mode().IsRegular() {
				paths = append(paths, p) // a deleted tracked file or a link is not in the view
			}
		}
		sort.Strings(paths)
		return paths, true, nil
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && d.Name() == ".git" && !all {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(paths)
	return paths, false, err
}

// Stage copies the listed files of dir into ws and returns the baseline's
// entries; each content is stored in blobs.
func Stage(dir string, paths []string, ws string, blobs Blobs) ([]Entry, error) {
	var out []Entry
	for _, p := range paths {
		src := filepath.Join(dir, filepath.FromSlash(p))
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // gone or replaced since the listing
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("repo: read %s: %w", src, err)
		}
		e := Entry{Path: p, Mode: modeOf(st.Mode()), Size: int64(len(data))}
		if e.SHA256, err = blobs.Put(data); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(ws, filepath.FromSlash(p)), data, e.Mode); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Restore writes the baseline's files into ws (a replay starts from them).
func Restore(entries []Entry, ws string, blobs Blobs) error {
	for _, e := range entries {
		data, err := blobs.Get(e.SHA256)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(ws, filepath.FromSlash(e.Path)), data, e.Mode); err != nil {
			return err
		}
	}
	return nil
}

func modeOf(m fs.FileMode) uint32 {
	if m.Perm()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func writeFile(p string, data []byte, mode uint32) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	if err := os.WriteFile(p, data, fs.FileMode(mode)); err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	return os.Chmod(p, fs.FileMode(mode))
}

func hashFile(p string) (Entry, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return Entry{}, err
	}
	st, err := os.Lstat(p)
	if err != nil {
		return Entry{}, err
	}
	sum := sha256.Sum256(data)
	return Entry{SHA256: hex.EncodeToString(sum[:]), Mode: modeOf(st.Mode()), Size: int64(len(data))}, nil
}

// Change is one file the run added, modified or deleted.
type Change struct {
	Path string
	Base *Entry // nil: added
	New  *Entry // nil: deleted
}

// Changes compares the baseline with the workspace ws. A file the run
// added that the tree's ignore rules would leave out (build output, caches)
// is not a change.
func (b *Baseline) Changes(ws string) ([]Change, error) {
	now := map[string]Entry{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".git" && !b.All {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		e, err := hashFile(p)
		if err != nil {
			return err
		}
		e.Path = rel
		now[rel] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("repo: read the workspace: %w", err)
	}
	var out []Change
	base := map[string]bool{}
	for i := range b.Files {
		e := &b.Files[i]
		base[e.Path] = true
		n, ok := now[e.Path]
		switch {
		case !ok:
			out = append(out, Change{Path: e.Path, Base: e})
		case n.SHA256 != e.SHA256 || n.Mode != e.Mode:
			out = append(out, Change{Path: e.Path, Base: e, New: &n})
		}
	}
	var added []string
	for p := range now {
		if !base[p] {
			added = append(added, p)
		}
	}
	ignored := b.ignored(added)
	for _, p := range added {
		if !ignored[p] {
			n := now[p]
			out = append(out, Change{Path: p, New: &n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ignored asks git which of paths the tree's ignore rules leave out (none
// when the tree is not a git checkout, the view has every file, or git
// cannot say).
func (b *Baseline) ignored(paths []string) map[string]bool {
	out := map[string]bool{}
	if !b.Git || b.All || len(paths) == 0 {
		return out
	}
	cmd := exec.Command("git", "-C", b.Dir, "check-ignore", "--no-index", "-z", "--stdin")
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	res, _ := cmd.Output() // exit 1: none ignored
	for _, p := range strings.Split(string(res), "\x00") {
		if p != "" {
			out[p] = true
		}
	}
	return out
}

// Diff prints changes in git's unified format (binary files named, not
// shown), comparing the baseline's contents with the workspace ws. It
// needs git on the PATH.
func Diff(changes []Change, ws string, blobs Blobs) (string, error) {
	if len(changes) == 0 {
		return "", nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", errors.New("repo: printing a diff needs git on the PATH")
	}
	tmp, err := os.MkdirTemp("", "apodex-diff-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, c := range changes {
		if c.Base != nil {
			data, err := blobs.Get(c.Base.SHA256)
			if err != nil {
				return "", err
			}
			if err := writeFile(filepath.Join(tmp, "a", filepath.FromSlash(c.Path)), data, c.Base.Mode); err != nil {
				return "", err
			}
		}
		if c.New != nil {
			data, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(c.Path)))
			if err != nil {
				return "", fmt.Errorf("repo: %w", err)
			}
			if err := writeFile(filepath.Join(tmp, "b", filepath.FromSlash(c.Path)), data, c.New.Mode); err != nil {
				return "", err
			}
		}
	}
	os.MkdirAll(filepath.Join(tmp, "a"), 0o755)
	os.MkdirAll(filepath.Join(tmp, "b"), 0o755)
	cmd := exec.Command("git", "-c", "core.quotepath=off", "diff", "--no-index", "--no-prefix", "--no-renames", "--no-color", "a", "b")
	cmd.Dir = tmp
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 { // 1: there are differences
			return "", fmt.Errorf("repo: git diff: %v: %s", err, strings.TrimSpace(errb.String()))
		}
	}
	return headers(out.String()), nil
}

// headers rewrites the "diff --git" lines of a diff of the directories a
// and b with --no-prefix ("b/p b/p" for an added file) to git's own
// ("a/p b/p").
func headers(diff string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(diff))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "diff --git "); ok && !strings.HasPrefix(s, `"`) && len(s)%2 == 1 {
			p := s[2 : (len(s)-1)/2]
			line = "diff --git a/" + p + " b/" + p
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
