package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// builder writes a record by hand and reads it back.
type builder struct {
	t   *testing.T
	dir string
	log *record.Log
}

func newBuilder(t *testing.T) *builder {
	t.Helper()
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log, err := record.Create(dir, func() time.Time { at = at.Add(time.Second); return at })
	if err != nil {
		t.Fatal(err)
	}
	return &builder{t: t, dir: dir, log: log}
}

func (b *builder) add(typ, agent string, payload any) int64 {
	b.t.Helper()
	seq, err := b.log.Append(typ, agent, payload)
	if err != nil {
		b.t.Fatal(err)
	}
	return seq
}

// call appends a tool call and its result; it returns the call's seq.
func (b *builder) call(turn int, id, name, args string, res record.ToolResult) int64 {
	seq := b.add(record.TypeToolCall, "main", record.ToolCall{Turn: turn, CallID: id, Name: name, Arguments: args})
	res.Turn, res.CallID, res.Name = turn, id, name
	b.add(record.TypeToolResult, "main", res)
	return seq
}

func (b *builder) delta(id, path, before, after string, n int64) {
	b.add(record.TypeFileDelta, "main", record.FileDelta{CallID: id, Path: path, Before: before, After: after, Bytes: n})
}

func (b *builder) events() []record.Event {
	b.t.Helper()
	if err := b.log.Close(); err != nil {
		b.t.Fatal(err)
	}
	c, err := record.Read(b.dir)
	if err != nil {
		b.t.Fatal(err)
	}
	return c.Events
}

var (
	hData   = hash("name,value\na,1\nb,2\n")
	hSum    = hash("3\n")
	hReport = hash("# Sum\n3\n")
)

func ok(code int) record.ToolResult {
	return record.ToolResult{Output: "exit code: 0", Meta: &record.ToolMeta{ExitCode: &code, DurationMS: 12}}
}

// scenario: read the input, sum it in bash, write a report, claim, copy the
// sum to /outputs, deliver. It returns the events and the seqs of the calls.
func scenario(t *testing.T) ([]record.Event, map[string]int64) {
	b := newBuilder(t)
	s := map[string]int64{}
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r1", Inputs: []record.FileEntry{{Path: "/inputs/data.csv", SHA256: hData, Bytes: 18}}})
	b.add(record.TypeModelRequest, "main", record.ModelRequest{Turn: 1})
	s["read"] = b.call(1, "c1", "read_file", `{"path":"/inputs/data.csv"}`,
		record.ToolResult{Output: "     1\tname,value\n     2\ta,1\n     3\tb,2\n[/inputs/data.csv: lines 1-3 of 3]"})
	s["awk"] = b.call(2, "c2", "bash", `{"command":"awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv > /workspace/sum.txt"}`, ok(0))
	b.delta("c2", "/workspace/sum.txt", "", hSum, 2)
	s["grep"] = b.call(3, "c3", "grep", `{"pattern":"value","path":"/inputs"}`,
		record.ToolResult{Output: "/inputs/data.csv:1: name,value\n[1 match in 1 file]"})
	s["write"] = b.call(3, "c4", "write_file", `{"path":"report.md","content":"# Sum\n3\n"}`, record.ToolResult{Output: "wrote"})
	b.delta("c4", "/workspace/report.md", "", hReport, 8)
	s["claim"] = b.add(record.TypeToolCall, "main", record.ToolCall{Turn: 4, CallID: "c5", Name: "claim_outputs", Arguments: `{"paths":["/outputs/sum.txt"]}`})
	// publish.LeaseEvent's "agent" is the envelope's.
	b.add(record.TypeLease, "main", map[string]any{"action": "granted", "holder": "main", "paths": []string{"/outputs/sum.txt"}})
	b.add(record.TypeToolResult, "main", record.ToolResult{Turn: 4, CallID: "c5", Name: "claim_outputs", Output: "you hold the publishing lease"})
	s["cp"] = b.call(5, "c6", "bash", `{"command":"cp /workspace/sum.txt /outputs/sum.txt"}`, ok(0))
	b.delta("c6", "/outputs/sum.txt", "", hSum, 2)
	s["fail"] = b.call(6, "c7", "bash", `{"command":"cat /workspace/nope"}`,
		record.ToolResult{Output: "exit code: 1", FullRef: hash("big"), FullBytes: 9000, Meta: &record.ToolMeta{ExitCode: new(1), DurationMS: 3}})
	b.add("board_mutation", "lead", map[string]any{"x": 1}) // a type this package does not know
	b.add(record.TypeLease, "main", map[string]any{"action": "released", "holder": "main", "paths": []string{"/outputs/sum.txt"}, "reason": "finished"})
	b.add(record.TypeDelivery, "", Delivery{OK: true, Entries: []DeliveryEntry{{Path: "/outputs/sum.txt", Agent: "main", Baseline: "absent", SHA256: hSum, Bytes: 2, Status: "delivered"}}})
	b.add(record.TypeRunFinished, "", record.RunFinished{Status: "completed"})
	return b.events(), s
}

func TestScenario(t *testing.T) {
	events, seq := scenario(t)
	s, err := FromRecord(events)
	if err != nil {
		t.Fatal(err)
	}
	awk, cp, write := seq["awk"], seq["cp"], seq["write"]
	act := func(tool string, n int64) string { return tool + "#" + itoa(n) }

	t.Run("F", func(t *testing.T) {
		want := map[string]string{"/inputs/data.csv": hData, "/workspace/sum.txt": hSum, "/workspace/report.md": hReport, "/outputs/sum.txt": hSum}
		if len(s.Files) != len(want) {
			t.Fatalf("files %v", s.Files)
		}
		for p, h := range want {
			if s.Files[p].Hash != h {
				t.Errorf("%s: hash %q, want %q", p, s.Files[p].Hash, h)
			}
		}
		if f := s.Files["/outputs/sum.txt"]; f.Step != cp || f.CallID != "c6" || f.Agent != "main" || f.Bytes != 2 {
			t.Errorf("outputs/sum.txt: %+v", f)
		}
	})
	t.Run("C", func(t *testing.T) {
		if len(s.Commands) != 3 {
			t.Fatalf("commands %+v", s.Commands)
		}
		c := s.Commands[0]
		if c.Seq != awk || !c.Done || c.ExitCode != 0 || c.DurationMS != 12 || c.OutputRef != "inline" || !slices.Equal(c.Changed, []string{"/workspace/sum.txt"}) {
			t.Errorf("awk command: %+v", c)
		}
		if f := s.Commands[2]; f.ExitCode != 1 || f.OutputRef != hash("big") || f.Bytes != 9000 {
			t.Errorf("failed command: %+v", f)
		}
	})
	t.Run("I", func(t *testing.T) {
		if len(s.Artifacts) != 3 {
			t.Fatalf("artifacts %v", s.Artifacts)
		}
		want := Artifact{Path: "/outputs/sum.txt", Hash: hSum, Bytes: 2, Producer: "main", CallID: "c6", Tool: "bash", Action: act("bash", cp), Step: cp}
		if got := s.Artifacts["/outputs/sum.txt"]; got != want {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
		if a := s.Artifacts["/workspace/report.md"]; a.Tool != "write_file" || a.Step != write {
			t.Errorf("report: %+v", a)
		}
	})
	t.Run("Q", func(t *testing.T) {
		if len(s.Evidence) != 2 {
			t.Fatalf("evidence %+v", s.Evidence)
		}
		e1, e2 := s.Evidence[0], s.Evidence[1]
		if e1.ID != "E1" || e1.Source != "/inputs/data.csv" || e1.Seq != seq["read"] || !strings.Contains(e1.Text, "b,2") || e1.Time.IsZero() {
			t.Errorf("E1: %+v", e1)
		}
		if e2.ID != "E2" || e2.Source != "/inputs" || !slices.Equal(e2.Files, []string{"/inputs/data.csv"}) {
			t.Errorf("E2: %+v", e2)
		}
	})
	t.Run("G", func(t *testing.T) {
		want := []Edge{
			{From: "/inputs/data.csv@" + hData, To: "E1", Kind: EdgeRead},
			{From: "/inputs/data.csv@" + hData, To: act("bash", awk), Kind: EdgeInput},
			{From: act("bash", awk), To: "/workspace/sum.txt@" + hSum, Kind: EdgeWrote},
			{From: "/inputs/data.csv@" + hData, To: "E2", Kind: EdgeRead},
			{From: "E1", To: act("write_file", write), Kind: EdgeContext}, // not E2: same turn
			{From: act("write_file", write), To: "/workspace/report.md@" + hReport, Kind: EdgeWrote},
			{From: "/workspace/sum.txt@" + hSum, To: act("bash", cp), Kind: EdgeInput},
			{From: act("bash", cp), To: "/outputs/sum.txt@" + hSum, Kind: EdgeWrote},
		}
		var got []Edge
		for _, e := range s.Graph.Edges {
			e.Seq = 0
			got = append(got, e)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("edges:\n got %v\nwant %v", got, want)
		}
	})
	t.Run("Provenance", func(t *testing.T) {
		for path, want := range map[string]string{
			"/outputs/sum.txt":     "/outputs/sum.txt ← " + act("bash", cp) + " ← /workspace/sum.txt ← " + act("bash", awk) + " ← /inputs/data.csv",
			"/workspace/report.md": "/workspace/report.md ← " + act("write_file", write) + " ← [context] E1 ← /inputs/data.csv",
		} {
			chains := s.Provenance(path)
			if len(chains) != 1 || chains[0].String() != want || Format(chains) != want {
				t.Errorf("%s: %v, want %q", path, chains, want)
			}
		}
		if s.Provenance("/outputs/none") != nil {
			t.Error("provenance of a missing artifact")
		}
	})
	t.Run("K", func(t *testing.T) {
		k := s.Control
		if k.LeaseHolder != "" || !slices.Equal(k.Manifest, []string{"/outputs/sum.txt"}) || len(k.Leases) != 2 || k.Leases[0].Agent != "main" {
			t.Errorf("control: %+v", k)
		}
		if k.Delivery == nil || !k.Delivery.OK {
			t.Errorf("delivery: %+v", k.Delivery)
		}
		if got := s.Missing([]string{"/outputs/sum.txt", "/outputs/report.md"}); !slices.Equal(got, []string{"/outputs/report.md"}) {
			t.Errorf("missing %v", got)
		}
		if got := s.Missing(nil); len(got) != 0 {
			t.Errorf("missing from manifest %v", got)
		}
	})
	t.Run("Render", func(t *testing.T) {
		var b strings.Builder
		if err := s.RenderArtifacts(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s%s", b.String(), s.Summary())
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "2 B") || !strings.Contains(lines[0], shortHash(hSum)) ||
			!strings.HasSuffix(lines[0], "/outputs/sum.txt ← "+act("bash", cp)+" ← /workspace/sum.txt ← "+act("bash", awk)+" ← /inputs/data.csv") {
			t.Errorf("render:\n%s", b.String())
		}
		c := s.Summary()
		if c != (Counts{Files: 4, Inputs: 1, Evidence: 2, Commands: 3, FailedCommands: 1, Artifacts: 3, Outputs: 1, Nodes: len(s.Graph.Nodes), Edges: 8}) {
			t.Errorf("summary %+v", c)
		}
	})
}

func TestIncrementalEqualsFold(t *testing.T) {
	events, seq := scenario(t)
	want, err := FromRecord(events)
	if err != nil {
		t.Fatal(err)
	}
	s := New()
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
		if e.Seq == seq["write"]+2 { // the report's delta: nothing under /outputs yet
			if got := s.Missing([]string{"/outputs/sum.txt"}); len(got) != 1 {
				t.Errorf("missing before the copy: %v", got)
			}
		}
	}
	if !reflect.DeepEqual(s, want) {
		t.Error("Apply one by one differs from FromRecord")
	}
	if err := s.Apply(events[0]); !errors.Is(err, ErrOrder) {
		t.Errorf("replayed event: %v", err)
	}
}

func TestDeletionAndBadEvents(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{Inputs: []record.FileEntry{{Path: "/inputs/a.txt", SHA256: hash("a"), Bytes: 1}}})
	b.call(1, "c1", "bash", `{"command":"cp a.txt b.txt; cat /inputs/a.txt > x.txt"}`, ok(0))
	b.delta("c1", "/workspace/x.txt", "", hash("a"), 1)
	b.call(2, "c2", "bash", `{"command":"rm x.txt"}`, ok(0))
	b.delta("c2", "/workspace/x.txt", hash("a"), "", 0)
	b.add("something_new", "", map[string]any{"path": "/outputs/zzz"})
	b.add(record.TypeToolCall, "main", record.ToolCall{Turn: 3, CallID: "c3", Name: "bash", Arguments: `{"command":"sleep 99"}`})
	events := b.events()
	s, err := FromRecord(events)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Files["/workspace/x.txt"]; ok {
		t.Error("deleted file still in F")
	}
	if _, ok := s.Artifacts["/workspace/x.txt"]; ok {
		t.Error("deleted file still in I")
	}
	if len(s.Files) != 1 || len(s.Commands) != 3 || s.Commands[2].Done || s.Summary().FailedCommands != 1 {
		t.Errorf("files %v commands %+v", s.Files, s.Commands)
	}
	if in := s.Graph.Into("bash#2", EdgeInput); len(in) != 1 || in[0].From != "/inputs/a.txt@"+hash("a") {
		t.Errorf("inputs of bash#2: %v", in)
	}

	bad := record.Event{Seq: 99, Type: record.TypeFileDelta, Raw: []byte(`{"seq":99,"path":7}`)}
	before := len(s.Files)
	if err := s.Apply(bad); err == nil || len(s.Files) != before {
		t.Errorf("bad payload: err %v", err)
	}
	if err := s.Apply(record.Event{Seq: 99, Type: "unknown"}); err != nil {
		t.Errorf("unknown type after a refused event: %v", err)
	}
}

func TestCommandPaths(t *testing.T) {
	files := map[string]FileState{"/inputs/a.csv": {}, "/inputs/b.csv": {}, "/workspace/s.txt": {}, "/workspace/d/x.py": {}, "/outputs/r.md": {}}
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"awk -F, '{s+=$2}' /inputs/a.csv > /workspace/s.txt", []string{"/inputs/a.csv"}},
		{"echo 1 >> /workspace/s.txt", []string{"/workspace/s.txt"}},
		{"cat /inputs/*.csv|sort>s.txt 2>&1", []string{"/inputs/a.csv", "/inputs/b.csv"}},
		{"cd /workspace && python3 d/x.py --in=/inputs/b.csv", []string{"/workspace/d/x.py", "/inputs/b.csv"}},
		{`sed "s/a/b/" "/outputs/r.md" $HOME/s.txt ../etc/passwd /inputs/none`, []string{"/outputs/r.md"}},
		{"cat /inputs/a.csv /inputs/a.csv", []string{"/inputs/a.csv"}},
		{"", nil},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			if got := commandPaths(tc.cmd, files); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzCommandPaths(f *testing.F) {
	files := map[string]FileState{"/inputs/a.csv": {}, "/workspace/s.txt": {}}
	f.Add("cat /inputs/a.csv > s.txt")
	f.Add(">>>> /workspace/[ *")
	f.Fuzz(func(t *testing.T, cmd string) {
		for _, p := range commandPaths(cmd, files) {
			if _, ok := files[p]; !ok {
				t.Fatalf("%q gave unknown %q", cmd, p)
			}
		}
	})
}

func TestFormatJoinsSources(t *testing.T) {
	f := func(p string) Hop { return Hop{Kind: KindFile, ID: p, Label: p} }
	a := func(id string) Hop { return Hop{Kind: KindAction, ID: id, Label: id} }
	chains := []Chain{
		{Hops: []Hop{f("/outputs/r"), a("bash#9"), f("/workspace/a"), a("bash#3"), f("/inputs/x")}},
		{Hops: []Hop{f("/outputs/r"), a("bash#9"), f("/inputs/y")}},
		{Hops: []Hop{f("/outputs/r"), a("bash#9"), f("/inputs/z")}, Cut: true},
	}
	want := "/outputs/r ← bash#9 ← (/workspace/a ← bash#3 ← /inputs/x), /inputs/y, (/inputs/z ← …)"
	if got := Format(chains); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
