package publish

import (
	"os"
	"strings"
	"testing"
)

func TestReconcile(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"stale.txt": "from last week\n", "keep.txt": "undeclared\n", "changed.txt": "v1\n"})
	if d := f.plane.Reconcile(); d.OK || !strings.Contains(d.Reason, "nothing was claimed") || len(d.Entries) != 0 || len(d.Undeclared) != 3 {
		t.Fatalf("empty manifest: %+v", d)
	}
	if _, err := f.plane.Claim("main", []string{
		"/outputs/good.md", "/outputs/missing.md", "/outputs/empty.md", "/outputs/stale.txt",
		"/outputs/changed.txt", "/outputs/link.md", "/outputs/hard.md", "/outputs/d/dir.md", "/outputs/under/x.md",
	}); err != nil {
		t.Fatal(err)
	}
	put(t, f.host("good.md"), "# Good\n")
	put(t, f.host("empty.md"), "")
	put(t, f.host("changed.txt"), "v2\n")
	put(t, f.host("other"), "o\n")
	put(t, f.host("scratch/tmp.bin"), "scratch is never listed")
	// What no agent can make through the plane, but a damaged or foreign
	// tree might hold.
	os.Symlink("/etc/passwd", f.host("link.md"))
	os.Link(f.host("other"), f.host("hard.md"))
	mkdir(t, f.host("d/dir.md"))
	os.Symlink("/inputs", f.host("under"))

	d := f.plane.Reconcile()
	want := map[string][2]string{ // path -> status, reason
		"/outputs/changed.txt": {Delivered, ""},
		"/outputs/d/dir.md":    {Failed, ReasonNotRegular},
		"/outputs/empty.md":    {Failed, ReasonEmpty},
		"/outputs/good.md":     {Delivered, ""},
		"/outputs/hard.md":     {Failed, ReasonHardLink},
		"/outputs/link.md":     {Failed, ReasonNotRegular},
		"/outputs/missing.md":  {Failed, ReasonMissing},
		"/outputs/stale.txt":   {Failed, ReasonUnchanged},
		"/outputs/under/x.md":  {Failed, ReasonNotRegular},
	}
	if len(d.Entries) != len(want) || d.OK {
		t.Fatalf("delivery %+v", d)
	}
	for _, e := range d.Entries {
		w := want[e.Path]
		if e.Status != w[0] || e.Reason != w[1] || e.Agent != "main" || (e.Status == Failed) == (e.Detail == "") {
			t.Errorf("%s: %+v, want %v", e.Path, e, w)
		}
	}
	good := d.Entries[3]
	if good.Path != "/outputs/good.md" || good.SHA256 != hashOf("# Good\n") || good.Bytes != 7 || good.Baseline != Absent {
		t.Fatalf("good entry %+v", good)
	}
	if st := d.Entries[7]; st.Baseline != hashOf("from last week\n") || st.SHA256 != st.Baseline {
		t.Fatalf("stale entry %+v", st)
	}
	if strings.Join(d.Undeclared, ",") != "/outputs/keep.txt,/outputs/other,/outputs/under" {
		t.Fatalf("undeclared %v", d.Undeclared)
	}
	if !strings.Contains(d.Reason, "7 of 9 declared paths not delivered") || !strings.Contains(d.Reason, "/outputs/stale.txt (unchanged)") {
		t.Fatalf("reason %q", d.Reason)
	}
}

func TestReconcileOK(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"stale.txt": "old\n"})
	f.plane.Claim("main", []string{"/outputs/a.md", "/outputs/stale.txt"})
	put(t, f.host("a.md"), "a")
	put(t, f.host("stale.txt"), "new\n")
	f.plane.Release("main", "finished")
	if d := f.plane.Reconcile(); !d.OK || d.Reason != "" || len(d.Entries) != 2 || len(d.Undeclared) != 0 {
		t.Fatalf("delivery %+v", d)
	}
}
