package board

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestRender(t *testing.T) {
	var buf bytes.Buffer
	if err := (&Board{}).Render(&buf); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "The board is empty; add items with board_add.\n" {
		t.Errorf("empty board: %q", got)
	}

	b := &Board{}
	steps := []func() (Event, error){
		func() (Event, error) {
			return b.Add("lead", "Survey the sources", "List primary sources on X, with links", nil, "research")
		},
		func() (Event, error) {
			return b.Add("lead", "Extract the tables", "Tables 2 and 3 of each source as CSV", []string{"T1"}, "research")
		},
		func() (Event, error) { return b.Add("lead", "Check units", "Units agree across sources", nil, "") },
		func() (Event, error) {
			return b.Add("lead", "Write the comparison, a title long enough to be clipped in the table", "Compare", []string{"T2", "T3"}, "")
		},
		func() (Event, error) { return b.Assign("T1", "a1") },
		func() (Event, error) { return b.Attach("T1", []string{"report:a1"}) },
		func() (Event, error) { return b.Unassign("T1", "a1") },
		func() (Event, error) {
			return b.Resolve("lead", "T1", "three sources\nfound, links checked", []string{"sha256:abc"})
		},
		func() (Event, error) { return b.Assign("T2", "a2") },
		func() (Event, error) { return b.Add("user", "Translate", "Into French", nil, "") },
		func() (Event, error) { return b.Cancel("user", "T5", "not needed") },
	}
	for i, step := range steps {
		if _, err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	buf.Reset()
	if err := b.Render(&buf); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("\n")
	for _, id := range []string{"T1", "T4"} {
		if err := b.RenderItem(&buf, id); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("\n")
	}
	golden(t, "render.golden", buf.Bytes())

	if err := b.RenderItem(&buf, "T9"); err == nil {
		t.Error("RenderItem of an unknown item did not fail")
	}
}
