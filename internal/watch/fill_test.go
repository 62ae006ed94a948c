package watch

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// prefillOf is a Prefill of dir's files as they are, but with each file's
// blocks and hash replaced by made-up values only a tree that took them
// from the Prefill (no stat, no read) can report.
func prefillOf(t *testing.T, dir string, dirs, files []string) Prefill {
	t.Helper()
	type f struct {
		rel, name string
		e         Entry
	}
	byDir := map[int][]f{}
	for _, rel := range files {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		e := entryOf(fi)
		e.Blocks, e.UID, e.GID = 1000, 4242, 4242 // made up; UID/GID come from a file's stat
		d, name := splitRel(rel)
		i := slices.Index(dirs, d) // -1: the root
		if d != "" && i < 0 {
			t.Fatalf("%s is in no directory listed", rel)
		}
		byDir[i] = append(byDir[i], f{rel, name, e})
	}
	return Prefill{Dirs: dirs, OneOwner: true, Files: func(i int, yield func(string, Entry, Sum) bool) {
		for _, x := range byDir[i] {
			if !yield(x.name, x.e, sumOf("manifest of "+x.rel)) {
				return
			}
		}
	}}
}

// A prefilled tree takes each file's stat and hash from the Prefill (its
// made-up blocks count in Usage, its made-up hash is the content before a
// change), takes the owner from one file's stat, watches every
// directory: a change made afterwards is seen with the prefilled hash as
// its Before, a new file and a removed one too.
func TestPrefillIsTakenWithoutStatOrRead(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "top.txt"), "t")
	write(t, filepath.Join(dir, "a/b/deep.txt"), "d")
	write(t, filepath.Join(dir, "a/x.txt"), "x")
	must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"top.txt", "a/b/deep.txt", "a/x.txt"} {
		must(t, os.Chtimes(filepath.Join(dir, p), old, old))
	}
	set := NewSet()
	defer set.Close()
	set.Prefill(dir, prefillOf(t, dir, []string{"a", "a/b", "empty"}, []string{"a/b/deep.txt", "a/x.txt", "top.txt"}))
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.Watches(); n != 4 {
		t.Errorf("%d directories watched, want 4 (the root, a, a/b, empty)", n)
	}
	blocks, apparent, count := tr.Usage()
	var dirBlocks int64
	for _, d := range []string{"a", "a/b", "empty"} {
		e, _ := tr.Entry(d)
		dirBlocks += e.Blocks * 512
		if fi, _ := os.Lstat(filepath.Join(dir, d)); e != entryOf(fi) {
			t.Errorf("directory %s: %+v, want its lstat %+v", d, e, entryOf(fi))
		}
	}
	if count != 6 || apparent != 3 || blocks != dirBlocks+3*1000*512 {
		t.Errorf("usage %d blocks, %d bytes, %d entries; want the prefilled blocks (%d), 3 bytes, 6 entries", blocks, apparent, count, dirBlocks+3*1000*512)
	}
	e, _ := tr.Entry("a/b/deep.txt")
	if fi, _ := os.Lstat(filepath.Join(dir, "a/b/deep.txt")); e.UID != entryOf(fi).UID || e.GID != entryOf(fi).GID {
		t.Errorf("a file's owner %d:%d, want its stat's", e.UID, e.GID)
	}
	m := tr.Mark()
	defer m.Close()
	write(t, filepath.Join(dir, "a/b/deep.txt"), "changed")
	write(t, filepath.Join(dir, "empty/new.txt"), "n")
	must(t, os.Remove(filepath.Join(dir, "top.txt")))
	got := map[string]FileChange{}
	for _, c := range m.TakeFiles() {
		got[c.Rel] = c
	}
	if c := got["a/b/deep.txt"]; !c.Had || c.Before != sumOf("manifest of a/b/deep.txt") || c.After != sumOf("changed") {
		t.Errorf("a changed file: %+v; want the prefilled hash before and the new one after", c)
	}
	if c := got["empty/new.txt"]; c.Had || !c.Has || c.After != sumOf("n") {
		t.Errorf("a new file in a prefilled directory: %+v", c)
	}
	if c := got["top.txt"]; !c.Had || c.Has || c.Before != sumOf("manifest of top.txt") {
		t.Errorf("a removed file: %+v", c)
	}
	if len(got) != 3 {
		t.Errorf("changes %v, want 3", got)
	}
	files, _ := tr.Files(10)
	var rels []string
	for _, f := range files {
		rels = append(rels, f.Rel)
	}
	if want := []string{"a/b/deep.txt", "a/x.txt", "empty/new.txt"}; !slices.Equal(rels, want) {
		t.Errorf("Files %v, want %v", rels, want)
	}
}

// A Prefill that does not fit the directory (a listed directory missing, a
// file that is not a regular file) is dropped whole: the tree is walked,
// every stat real.
func TestPrefillThatDoesNotFitIsWalked(t *testing.T) {
	for name, p := range map[string]func(dir string) Prefill{
		"a directory missing": func(dir string) Prefill {
			return prefillOf(t, dir, []string{"a", "gone"}, []string{"a/x.txt"})
		},
		"a file that is not a regular file": func(dir string) Prefill {
			p := prefillOf(t, dir, []string{"a"}, []string{"a/x.txt"})
			files := p.Files
			p.Files = func(i int, yield func(string, Entry, Sum) bool) {
				files(i, func(name string, e Entry, sum Sum) bool {
					e.Mode |= fs.ModeSymlink
					return yield(name, e, sum)
				})
			}
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "a/x.txt"), "x")
			set := NewSet()
			defer set.Close()
			set.Prefill(dir, p(dir))
			tr, err := set.For(dir)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := tr.Entry("a/x.txt")
			fi, _ := os.Lstat(filepath.Join(dir, "a/x.txt"))
			if !ok || e != entryOf(fi) {
				t.Errorf("a/x.txt %+v, want its lstat %+v", e, entryOf(fi))
			}
			if _, _, count := tr.Usage(); count != 2 {
				t.Errorf("%d entries, want 2", count)
			}
			if n := tr.Watches(); n != 2 {
				t.Errorf("%d watches, want 2 (no watch left from the dropped fill)", n)
			}
			files, _ := tr.Files(10)
			if len(files) != 1 || files[0].Sum != sumOf("x") {
				t.Errorf("files %+v, want a/x.txt read", files)
			}
		})
	}
}

// TakeWhere lists "." and the changed entries keep accepts, the first time
// every entry's stat, then only what changed; removed entries are left out.
func TestTakeWhereFiltersByStat(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "plain"), "p")
	write(t, filepath.Join(dir, "d/exec"), "e")
	must(t, os.Chmod(filepath.Join(dir, "d/exec"), 0o755))
	set := NewSet()
	defer set.Close()
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	sub := tr.Subscribe()
	defer sub.Close()
	executable := func(e Entry) bool { return e.Mode.IsRegular() && e.Mode&0o100 != 0 }
	if got := sub.TakeWhere(executable); !slices.Equal(got, []string{".", "d/exec"}) {
		t.Errorf("first TakeWhere %v, want . and d/exec", got)
	}
	if got := sub.TakeWhere(executable); !slices.Equal(got, []string{"."}) {
		t.Errorf("TakeWhere with nothing changed %v", got)
	}
	write(t, filepath.Join(dir, "new"), "n")
	must(t, os.Chmod(filepath.Join(dir, "new"), 0o700))
	must(t, os.Chmod(filepath.Join(dir, "plain"), fs.FileMode(0o600)))
	must(t, os.Remove(filepath.Join(dir, "d/exec")))
	if got := sub.TakeWhere(executable); !slices.Equal(got, []string{".", "new"}) {
		t.Errorf("TakeWhere after changes %v, want . and new", got)
	}
}

// A prefilled directory's files get nodes only when something names one
// of them: until then Usage, Files, Matching and a first TakeWhere answer
// from the Prefill; a directory removed whole reports each of its files
// removed with its prefilled hash; a first Take lists every entry.
func TestPrefillKeepsUntouchedDirectoriesLazy(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, d := range []string{"p", "q", "q/r"} {
		for _, n := range []string{"a.py", "b.tmp", "c.py"} {
			files = append(files, d+"/"+n)
			write(t, filepath.Join(dir, d, n), d+n)
		}
	}
	write(t, filepath.Join(dir, "top.py"), "top")
	files = append(files, "top.py")
	set := NewSet()
	defer set.Close()
	set.Prefill(dir, prefillOf(t, dir, []string{"p", "q", "q/r"}, files))
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	nodes := func() int32 {
		mu.Lock()
		defer mu.Unlock()
		return tr.nodes.n - int32(len(tr.nodes.frees))
	}
	if n := nodes(); n != 4 {
		t.Fatalf("%d nodes after the fill, want 4 (the root and 3 directories)", n)
	}
	if _, _, count := tr.Usage(); count != 13 {
		t.Errorf("%d entries, want 13", count)
	}
	list, more := tr.Files(100)
	var rels []string
	for _, f := range list {
		rels = append(rels, f.Rel)
		if f.Sum != sumOf("manifest of "+f.Rel) || !f.Hashed {
			t.Errorf("%s: not its prefilled hash", f.Rel)
		}
	}
	if want := []string{"p/a.py", "p/b.tmp", "p/c.py", "q/a.py", "q/b.tmp", "q/c.py", "q/r/a.py", "q/r/b.tmp", "q/r/c.py", "top.py"}; !slices.Equal(rels, want) || more != 0 {
		t.Errorf("Files %v (%d more), want %v", rels, more, want)
	}
	if got, _ := tr.Files(4); len(got) != 4 || got[3].Rel != "q/a.py" {
		t.Errorf("Files(4) %v", got)
	}
	tmps := tr.Matching(func(name string) bool { return path.Ext(name) == ".tmp" })
	slices.Sort(tmps)
	if want := []string{"p/b.tmp", "q/b.tmp", "q/r/b.tmp"}; !slices.Equal(tmps, want) {
		t.Errorf("Matching %v, want %v", tmps, want)
	}
	sandbox := tr.Shared("sandbox")
	if got := sandbox.TakeWhere(func(e Entry) bool { return e.Mode.IsDir() || e.Size >= 7 }); !slices.Equal(got, []string{".", "p", "q", "q/r", "q/r/a.py", "q/r/b.tmp", "q/r/c.py"}) {
		t.Errorf("first TakeWhere %v", got)
	}
	if n := nodes(); n != 4 {
		t.Fatalf("%d nodes after listing, want still 4", n)
	}
	m := tr.Mark()
	defer m.Close()
	write(t, filepath.Join(dir, "p/a.py"), "changed")
	must(t, os.RemoveAll(filepath.Join(dir, "q")))
	got := map[string]FileChange{}
	for _, c := range m.TakeFiles() {
		got[c.Rel] = c
	}
	if c := got["p/a.py"]; !c.Had || c.Before != sumOf("manifest of p/a.py") || c.After != sumOf("changed") {
		t.Errorf("p/a.py: %+v", c)
	}
	for _, rel := range []string{"q/a.py", "q/r/c.py"} {
		if c := got[rel]; !c.Had || c.Has || c.Before != sumOf("manifest of "+rel) {
			t.Errorf("%s, removed with its directory: %+v", rel, c)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d changes, want 7 (one rewritten, six removed): %v", len(got), got)
	}
	if _, _, count := tr.Usage(); count != 5 {
		t.Errorf("%d entries left, want 5 (p and its 3 files, top.py)", count)
	}
	if got := tr.Subscribe().Take(); !slices.Equal(got, []string{".", "p", "p/a.py", "p/b.tmp", "p/c.py", "top.py"}) {
		t.Errorf("a first Take %v", got)
	}
}

// When notification cannot tell (a queue overflow), a prefilled tree
// rescans itself like any other: every stat becomes the real one (the
// made-up blocks go), a file changed meanwhile is seen, and an unchanged
// file keeps its prefilled hash (no content change reported).
func TestPrefilledTreeRescans(t *testing.T) {
	dir := t.TempDir()
	files := []string{"p/a.py", "p/b.py", "q/c.py"}
	old := time.Now().Add(-time.Hour)
	for _, rel := range files {
		write(t, filepath.Join(dir, rel), rel)
		must(t, os.Chtimes(filepath.Join(dir, rel), old, old))
	}
	set := NewSet()
	defer set.Close()
	set.Prefill(dir, prefillOf(t, dir, []string{"p", "q"}, files))
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := tr.Mark()
	defer m.Close()
	must(t, os.WriteFile(filepath.Join(dir, "q/c.py"), []byte("new"), 0o644))
	mu.Lock()
	tr.rescan = true
	mu.Unlock()
	changes := m.TakeFiles()
	if len(changes) != 1 || changes[0].Rel != "q/c.py" || changes[0].Before != sumOf("manifest of q/c.py") || changes[0].After != sumOf("new") {
		t.Errorf("changes after a rescan: %+v, want q/c.py only", changes)
	}
	fresh := NewSet()
	defer fresh.Close()
	walked, err := fresh.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	b1, a1, c1 := tr.Usage()
	b2, a2, c2 := walked.Usage()
	if b1 != b2 || a1 != a2 || c1 != c2 {
		t.Errorf("usage after a rescan %d/%d/%d, a walk's %d/%d/%d", b1, a1, c1, b2, a2, c2)
	}
	for _, rel := range files {
		e1, _ := tr.Entry(rel)
		e2, _ := walked.Entry(rel)
		if e1 != e2 {
			t.Errorf("%s after a rescan %+v, a walk's %+v", rel, e1, e2)
		}
	}
}
