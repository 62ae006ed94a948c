package state

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

func TestReadAndIndex(t *testing.T) {
	if st, err := Read(t.TempDir()); st != nil || err == nil {
		t.Fatalf("Read of a directory without a record = %v, %v", st, err)
	}
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r1"})
	b.call(1, "c1", "bash", `{"command":"echo 3 > /outputs/sum.txt"}`, ok(0))
	b.delta("c1", "/outputs/sum.txt", "", hSum, 2)
	b.add(record.TypeLease, "main", map[string]any{"action": "granted", "holder": "main", "paths": []string{"/outputs/sum.txt", "/outputs/b.txt"}})
	b.events() // closes the log
	st, err := Read(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	ix := st.Index("r1")
	if ix.RunID != "r1" || len(ix.Artifacts) != 1 || ix.Artifacts[0].Path != "/outputs/sum.txt" || len(ix.Artifacts[0].Provenance) == 0 || ix.Artifacts[0].Line == "" {
		t.Fatalf("index %+v", ix)
	}
	var out strings.Builder
	if err := st.RenderIndex(&out, "r1"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run r1: 1 artifacts\n", "lease: held by main; manifest: /outputs/b.txt, /outputs/sum.txt\n", "missing: /outputs/b.txt\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("RenderIndex lacks %q:\n%s", want, out.String())
		}
	}
}
