package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/corpus"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/fetch"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// evidenceEnv is testEnv with a 300-document corpus holding one needle at
// /inputs/corpus, its index and Q recorded in a log.
func evidenceEnv(t *testing.T) (Env, *EvidenceEnv, *record.Log) {
	t.Helper()
	env := testEnv(t)
	dir := filepath.Join(env.FS.Inputs, "corpus")
	for i := range 300 {
		put(t, filepath.Join(dir, fmt.Sprintf("doc%03d.md", i)), fmt.Sprintf("# Doc %d\n\nRoutine minutes of meeting %d.\nNothing was decided.\n", i, i))
	}
	put(t, filepath.Join(dir, "minutes/needle.md"), "# Special meeting\n\nOpening remarks.\n\nThe council voted 7 to 2 to rebuild the north pier.\nWork starts in May.\n")
	ix, err := corpus.Open(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	log, err := record.Create(filepath.Join(t.TempDir(), "run"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	ev := &EvidenceEnv{Q: evidence.New(log, nil), Agent: "main", Corpus: ix, CorpusDir: dir, Producers: evidence.NewProducers(log)}
	env.Evidence = ev
	return env, ev, log
}

func callAll(t *testing.T, env Env, ev *EvidenceEnv, name, args string) tool.Result {
	t.Helper()
	tl, ok := tool.NewSet(append(Tools(env), EvidenceTools(ev)...)...).Get(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	return tl.Call(tool.WithCallID(context.Background(), "call-1"), json.RawMessage(args))
}

var hitLine = regexp.MustCompile(`\[(E[0-9]+)\] (\S+) lines ([0-9]+)-([0-9]+) · score`)
var footer = regexp.MustCompile(`\[evidence (E[0-9]+): (\S+) lines ([0-9]+)-([0-9]+), sha256:`)

func TestSearchFetchReadRegisterEvidence(t *testing.T) {
	env, ev, log := evidenceEnv(t)
	r := callAll(t, env, ev, "search", `{"query": "council pier vote"}`)
	m := hitLine.FindStringSubmatch(r.Output)
	if r.IsError || m == nil || m[2] != "/inputs/corpus/minutes/needle.md" || m[3] != "5" || m[4] != "6" ||
		!strings.Contains(r.Output, "The council voted 7 to 2 to rebuild the north pier.\nWork starts in May.") {
		t.Fatalf("search:\n%s", r.Output)
	}
	hit := m[1]
	it, ok := ev.Q.Get(hit)
	if !ok || it.Kind != record.EvidenceSearch || it.Text != "The council voted 7 to 2 to rebuild the north pier.\nWork starts in May." || it.CallID != "call-1" {
		t.Fatalf("Q entry %+v", it)
	}

	r = callAll(t, env, ev, "fetch", `{"ref": "`+hit+`"}`)
	f := footer.FindStringSubmatch(r.Output)
	if r.IsError || f == nil || f[1] == hit || f[2] != "/inputs/corpus/minutes/needle.md" || f[3] != "1" || f[4] != "6" || !strings.Contains(r.Output, "     5\tThe council voted") {
		t.Fatalf("fetch of a hit:\n%s", r.Output)
	}
	doc, _ := ev.Q.Get(f[1])
	if doc.Kind != record.EvidenceFetch || !strings.HasPrefix(doc.Text, "# Special meeting\n") {
		t.Fatalf("fetched %+v", doc)
	}
	// Fetching the same page again names the same id.
	if r2 := callAll(t, env, ev, "fetch", `{"ref": "minutes/needle.md"}`); footer.FindStringSubmatch(r2.Output)[1] != f[1] {
		t.Fatalf("re-fetch gave a new id:\n%s", r2.Output)
	}
	// Paging.
	r = callAll(t, env, ev, "fetch", `{"ref": "/inputs/corpus/minutes/needle.md", "offset": 5, "limit": 1}`)
	if f := footer.FindStringSubmatch(r.Output); f == nil || f[3] != "5" || f[4] != "5" || !strings.Contains(r.Output, "call fetch with offset=6") {
		t.Fatalf("paged fetch:\n%s", r.Output)
	}

	r = call(t, env, "read_file", `{"path": "/inputs/data.csv"}`)
	if f := footer.FindStringSubmatch(r.Output); f == nil || f[2] != "/inputs/data.csv" || f[3] != "1" || f[4] != "3" {
		t.Fatalf("read_file of an input:\n%s", r.Output)
	}
	r = call(t, env, "grep", `{"pattern": "bob", "path": "/inputs"}`)
	if m := regexp.MustCompile(`(?m)^/inputs/data\.csv:3: 2,bob  \[(E[0-9]+)\]$`).FindStringSubmatch(r.Output); m == nil {
		t.Fatalf("grep of an input shows no evidence id on its line:\n%s", r.Output)
	} else if it, _ := ev.Q.Get(m[1]); it.Span.From != 3 || it.Span.To != 3 {
		t.Fatalf("grep's id %s names lines %d-%d, want 3-3", m[1], it.Span.From, it.Span.To)
	}
	// Each run of adjacent matching lines is one id whose range holds
	// exactly those lines.
	put(t, filepath.Join(env.FS.Inputs, "runs.txt"), "a1\na2\nb3\na4\n")
	r = call(t, env, "grep", `{"pattern": "^a", "path": "/inputs/runs.txt"}`)
	ids := regexp.MustCompile(`(?m)^/inputs/runs\.txt:([0-9]): a[0-9]  \[(E[0-9]+)\]$`).FindAllStringSubmatch(r.Output, -1)
	if len(ids) != 3 || ids[0][2] != ids[1][2] || ids[1][2] == ids[2][2] {
		t.Fatalf("grep over two runs of matches:\n%s", r.Output)
	}
	for id, want := range map[string]string{ids[0][2]: "a1\na2", ids[2][2]: "a4"} {
		if text, err := ev.Q.Text(id); err != nil || text != want {
			t.Errorf("%s holds %q, want exactly %q", id, text, want)
		}
	}
	// The agent's own files are not evidence; a command's output is.
	if r := call(t, env, "read_file", `{"path": "/workspace/notes.txt"}`); strings.Contains(r.Output, "[evidence") {
		t.Fatalf("an agent-written file got an evidence id:\n%s", r.Output)
	}
	log.Append(record.TypeToolCall, "main", record.ToolCall{CallID: "b1", Name: "bash"})
	log.Append(record.TypeFileDelta, "main", record.FileDelta{CallID: "b1", Path: "/workspace/notes.txt"})
	if r := call(t, env, "read_file", `{"path": "/workspace/notes.txt"}`); !footer.MatchString(r.Output) {
		t.Fatalf("a command's output got no evidence id:\n%s", r.Output)
	}

	// Every id is on the record, in order.
	log.Sync()
	c, _ := record.Read(log.Dir())
	items, err := evidence.Fold(c.Events)
	if err != nil || len(items) != ev.Q.Len() {
		t.Fatalf("record holds %d ids, Q %d: %v", len(items), ev.Q.Len(), err)
	}
}

func TestEvidenceBadInput(t *testing.T) {
	env, ev, _ := evidenceEnv(t)
	for _, c := range []struct{ name, args, want string }{
		{"search", `{"query": ""}`, "the query is empty"},
		{"search", `{"query": "+ - :"}`, "has no words"},
		{"search", `{"query": "x", "k": -1}`, "k must be positive"},
		{"search", `{"query": "zebra"}`, "no passages match"},
		{"fetch", `{"ref": "E999"}`, "unknown evidence id E999"},
		{"fetch", `{"ref": ""}`, "ref is empty"},
		{"fetch", `{"ref": "http://example.com/"}`, "start the run with --network"},
		{"fetch", `{"ref": "ftp://example.com/x"}`, "only http and https"},
		{"fetch", `{"ref": "missing.md"}`, "no such corpus document"},
		{"fetch", `{"ref": "../../workspace/notes.txt"}`, "no such corpus document"},
		{"fetch", `{"ref": "/workspace/notes.txt"}`, "not in the corpus"},
		{"fetch", `{"ref": "doc001.md", "offset": 99}`, "past the end"},
	} {
		r := callAll(t, env, ev, c.name, c.args)
		if !strings.Contains(r.Output, c.want) {
			t.Errorf("%s %s: %q, want %q", c.name, c.args, r.Output, c.want)
		}
	}
	os.Symlink("/etc/passwd", filepath.Join(ev.CorpusDir, "link.md"))
	if r := callAll(t, env, ev, "fetch", `{"ref": "link.md"}`); !r.IsError || strings.Contains(r.Output, "root:") {
		t.Fatalf("fetch followed a link out of the corpus:\n%s", r.Output)
	}
}

func TestFetchURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Pier</title></head><body><article><p>The north pier was first opened to the public in 1898 after four years of work.</p><p>It was extended in 1920.</p></article></body></html>`)
	}))
	defer srv.Close()
	env, ev, log := evidenceEnv(t)
	ev.Network = true
	if r := callAll(t, env, ev, "fetch", `{"ref": "`+srv.URL+`/pier"}`); !r.IsError || !strings.Contains(r.Output, "--fetch-private") {
		t.Fatalf("loopback without --fetch-private:\n%s", r.Output)
	}
	ev.Guard = fetch.Guard{AllowPrivate: true, Timeout: 5 * time.Second}
	r := callAll(t, env, ev, "fetch", `{"ref": "`+srv.URL+`/pier"}`)
	f := footer.FindStringSubmatch(r.Output)
	if r.IsError || f == nil || !strings.Contains(r.Output, "first opened to the public in 1898") || strings.Contains(r.Output, "<p>") {
		t.Fatalf("fetch of a page:\n%s", r.Output)
	}
	log.Sync()

	// A replay serves the page from the record; the server is gone.
	srv.Close()
	rec, err := evidence.FromRecord(log.Dir())
	if err != nil {
		t.Fatal(err)
	}
	env2, ev2, _ := evidenceEnv(t)
	ev2.Network, ev2.Recorded = true, rec
	r2 := callAll(t, env2, ev2, "fetch", `{"ref": "`+srv.URL+`/pier"}`)
	if r2.IsError || !strings.Contains(r2.Output, "first opened to the public in 1898") || !strings.Contains(r2.Output, "served from the record") {
		t.Fatalf("replayed fetch:\n%s", r2.Output)
	}
	if r := callAll(t, env2, ev2, "fetch", `{"ref": "`+srv.URL+`/other"}`); !r.IsError || !strings.Contains(r.Output, "not in the recorded evidence") {
		t.Fatalf("replayed unrecorded URL:\n%s", r.Output)
	}
}

// fetch is offered only when it can read something read_file cannot: a
// corpus document or (with the network) a URL.
func TestFetchOfferedOnlyWhenItCanWork(t *testing.T) {
	names := func(ev *EvidenceEnv) string {
		var n []string
		for _, tl := range EvidenceTools(ev) {
			n = append(n, tl.Spec().Name)
		}
		return strings.Join(n, " ")
	}
	_, ev, _ := evidenceEnv(t)
	if got := names(ev); got != "search fetch" {
		t.Errorf("with a corpus: %q", got)
	}
	if got := names(&EvidenceEnv{Network: true}); got != "fetch" {
		t.Errorf("with the network: %q", got)
	}
	if got := names(&EvidenceEnv{}); got != "" {
		t.Errorf("with neither a corpus nor the network: %q", got)
	}
}
