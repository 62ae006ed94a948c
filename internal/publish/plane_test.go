package publish

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestClaimRefusesBadPaths(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"file": "x", "dir/a": "a"})
	tests := []struct {
		paths []string
		want  string
	}{
		{nil, "paths is empty"},
		{[]string{""}, "an empty path"},
		{[]string{"report.md"}, `"report.md" is relative; give the full path, e.g. /outputs/report.md`},
		{[]string{"/outputs"}, "/outputs is the directory itself"},
		{[]string{"/outputs/"}, `"/outputs/" is not written plainly; give it as /outputs`},
		{[]string{"/outputs//a"}, "give it as /outputs/a"},
		{[]string{"/outputs/./a"}, "give it as /outputs/a"},
		{[]string{"/outputs/../etc/passwd"}, `contains ".."`},
		{[]string{"/outputs/a/../../x"}, `contains ".."`},
		{[]string{"/workspace/a"}, "/workspace/a is not under /outputs"},
		{[]string{"/outputsx/a"}, "is not under /outputs"},
		{[]string{"/outputs/scratch"}, "/outputs/scratch is in /outputs/scratch/, which anyone may write"},
		{[]string{"/outputs/scratch/a.txt"}, "never delivered"},
		{[]string{"/outputs/a", "/outputs/a"}, "/outputs/a is listed twice"},
		{[]string{"/outputs/a", "/outputs/a/b"}, "/outputs/a/b is inside /outputs/a, also listed"},
		{[]string{"/outputs/a\x00"}, "NUL"},
		{[]string{"/outputs/" + strings.Repeat("x", 300)}, "longer than 255"},
		{[]string{"/outputs/dir"}, "/outputs/dir is a directory; a declared path must be a regular file"},
		{[]string{"/outputs/file/sub"}, "/outputs/file/sub cannot be created: /outputs/file is a file"},
		{[]string{"/outputs/ok", "/outputs/../x"}, "nothing was claimed"},
		{make([]string, MaxPaths+1), fmt.Sprintf("more than the manifest cap of %d", MaxPaths)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.paths), func(t *testing.T) {
			_, err := f.plane.Claim("main", tt.paths)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalidClaim) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if h, _ := f.plane.Holder(); h != "" {
				t.Fatalf("a refused claim took the lease for %q", h)
			}
		})
	}
	if len(f.plane.Manifest()) != 0 {
		t.Fatalf("manifest %v", f.plane.Manifest())
	}
	// A symlink already at a path cannot be declared.
	if err := os.Symlink("/etc/passwd", f.host("link")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.plane.Claim("main", []string{"/outputs/link"}); err == nil || !strings.Contains(err.Error(), "symbolic link (to /etc/passwd)") {
		t.Fatalf("symlink declared: %v", err)
	}
}

func TestLeaseHeldReleasedReclaimed(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"old.txt": "stale\n"})
	g, err := f.plane.Claim("main", []string{"/outputs/report.md", "/outputs/old.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Holder != "main" || !slices.Equal(g.Paths, []string{"/outputs/old.txt", "/outputs/report.md"}) ||
		g.Baselines["/outputs/report.md"] != Absent || g.Baselines["/outputs/old.txt"] != hashOf("stale\n") {
		t.Fatalf("grant %+v", g)
	}

	_, err = f.plane.Claim("helper", []string{"/outputs/other.md"})
	var held *HeldError
	if !errors.As(err, &held) || held.Holder != "main" || !strings.Contains(err.Error(), "held by main") || !strings.Contains(err.Error(), "/outputs/scratch/") {
		t.Fatalf("second claim: %v", err)
	}
	// The holder adds a path; repeating a held one is fine.
	g, err = f.plane.Claim("main", []string{"/outputs/report.md", "/outputs/sum.txt"})
	if err != nil || !slices.Equal(g.Added, []string{"/outputs/sum.txt"}) || len(g.Paths) != 3 {
		t.Fatalf("extend: %+v %v", g, err)
	}
	// A path inside a declared one is refused even across claims.
	if _, err := f.plane.Claim("main", []string{"/outputs/sum.txt/x"}); err == nil || !strings.Contains(err.Error(), "file inside a file") {
		t.Fatalf("nested: %v", err)
	}
	if f.plane.Release("helper", "finished") {
		t.Fatal("a non-holder released the lease")
	}
	if !f.plane.Release("main", "finished") || f.plane.Release("main", "again") {
		t.Fatal("release")
	}
	// The new holder re-declares old.txt after main changed it: the
	// baseline stays the one from before the run.
	put(t, f.host("old.txt"), "fresh\n")
	g, err = f.plane.Claim("helper", []string{"/outputs/old.txt", "/outputs/other.md"})
	if err != nil || g.Holder != "helper" || g.Baselines["/outputs/old.txt"] != hashOf("stale\n") {
		t.Fatalf("re-claim: %+v %v", g, err)
	}
	if h, paths := f.plane.Holder(); h != "helper" || len(paths) != 2 {
		t.Fatalf("holder %q %v", h, paths)
	}
	m := f.plane.Manifest()
	if len(m) != 4 || m[0].Path != "/outputs/old.txt" || m[0].Agent != "helper" || m[2].Agent != "main" {
		t.Fatalf("manifest %+v", m)
	}

	var got []string
	for _, e := range f.events {
		got = append(got, e.Action+":"+e.Agent+":"+e.Holder+":"+strings.Join(e.Paths, ","))
	}
	want := []string{
		"granted:main:main:/outputs/old.txt,/outputs/report.md",
		"refused:helper:main:/outputs/other.md",
		"granted:main:main:/outputs/sum.txt",
		"refused:main:main:/outputs/sum.txt/x",
		"released:main:main:/outputs/old.txt,/outputs/report.md,/outputs/sum.txt",
		"granted:helper:helper:/outputs/old.txt,/outputs/other.md",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f.events[0].Baselines["/outputs/report.md"] != Absent || f.events[1].Reason == "" || f.events[4].Reason != "finished" || f.events[0].Agent == "" {
		t.Fatalf("event details %+v", f.events)
	}
}

func TestClaimRace(t *testing.T) {
	for range 20 {
		f := newFixture(t, 0, nil)
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners, refused := []string{}, 0
		for i := range 8 {
			wg.Go(func() {
				agent := fmt.Sprintf("agent%d", i)
				_, err := f.plane.Claim(agent, []string{fmt.Sprintf("/outputs/%d.txt", i)})
				mu.Lock()
				defer mu.Unlock()
				var held *HeldError
				switch {
				case err == nil:
					winners = append(winners, agent)
				case errors.As(err, &held):
					refused++
				default:
					t.Errorf("%s: %v", agent, err)
				}
			})
		}
		wg.Wait()
		holder, paths := f.plane.Holder()
		if len(winners) != 1 || refused != 7 || holder != winners[0] || len(paths) != 1 || len(f.plane.Manifest()) != 1 {
			t.Fatalf("winners %v refused %d holder %q paths %v", winners, refused, holder, paths)
		}
	}
}

func TestNewRefusesStagingInsideOutputs(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "outputs")
	mkdir(t, out)
	if _, err := New(Config{Outputs: out, Staging: filepath.Join(out, "st")}); err == nil {
		t.Fatal("staging inside outputs accepted")
	}
	if _, err := New(Config{Outputs: "rel", Staging: filepath.Join(base, "st")}); err == nil {
		t.Fatal("relative outputs accepted")
	}
	p, err := New(Config{Outputs: out, Staging: filepath.Join(base, "outputs-staging")})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(out, "scratch")); err != nil || !fi.IsDir() || p.cfg.ScratchQuota != DefaultScratchQuota {
		t.Fatalf("scratch %v %v", fi, err)
	}
}
