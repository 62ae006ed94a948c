package runstate_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runtest"
)

// teamRecord runs the team-csv example (board, assignments, reports,
// merges, the lease, delivery, verification, verdicts) and returns its
// run directory.
func teamRecord(t *testing.T) string {
	t.Helper()
	m, err := scripted.Load("../../examples/team-csv/script.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := run.Config{Home: t.TempDir(), Objective: "Sum north and south, then report", Model: m,
		ModelInfo: record.ModelSettings{Provider: "scripted"}, NewID: func() string { return "cp" }, Settings: run.Settings{MaxAttempts: 1}}
	cfg.Mode, cfg.InputsDir, cfg.Sandbox = run.ModeTeam, "../../examples/team-csv/inputs", runtest.SandboxKind()
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		t.Fatalf("the team demo ended %s (%s): %s", s.Status, s.Termination, s.Error)
	}
	return s.RunDir
}

// sameLoad fails unless got is what a fold of the whole record gives.
func sameLoad(t *testing.T, what string, got *runstate.Loaded) {
	t.Helper()
	want, err := runstate.Load(got.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.State, want.State) {
		t.Fatalf("%s: the state from the checkpoint and the tail differs from the record folded from scratch:\n%s", what, diffFields(got.State, want.State))
	}
	if got.Events != want.Events || got.TornTail != want.TornTail || !reflect.DeepEqual(got.Skipped, want.Skipped) ||
		!reflect.DeepEqual(got.Integrity, want.Integrity) {
		t.Fatalf("%s: events %d torn %v skipped %v integrity %+v; from scratch %d %v %v %+v", what,
			got.Events, got.TornTail, got.Skipped, got.Integrity, want.Events, want.TornTail, want.Skipped, want.Integrity)
	}
}

// diffFields names the top-level fields of State that differ.
func diffFields(a, b *runstate.State) string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var out []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if f.IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, f.Name)
		}
	}
	return "fields: " + strings.Join(out, ", ")
}

// The projection from a checkpoint plus the events after it is the
// projection of the whole record, for a checkpoint after every event of
// a real team run; and the checkpoint the run itself wrote at its end
// serves a reader without a tail.
func TestCheckpointPlusTailIsTheWholeFold(t *testing.T) {
	dir := teamRecord(t)
	own, tail, err := runstate.LoadFrom(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tail != 0 {
		t.Errorf("the run's own checkpoint left %d events to fold; want 0 (it is written at the end of the segment)", tail)
	}
	sameLoad(t, "the run's own checkpoint", own)

	events, err := os.ReadFile(filepath.Join(dir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(filepath.Join(dir, record.HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(events), "\n")
	if n < 50 {
		t.Fatalf("the team run has %d events; the test wants a real record", n)
	}
	restore := func() {
		if err := os.WriteFile(filepath.Join(dir, record.EventsFile), events, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, record.HeadFile), head, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for k := 1; k <= n; k++ {
		if err := record.Cut(dir, k); err != nil {
			t.Fatal(err)
		}
		part, err := runstate.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := part.WriteCheckpoint(); err != nil {
			t.Fatal(err)
		}
		restore()
		got, tail, err := runstate.LoadFrom(dir)
		if err != nil {
			t.Fatalf("checkpoint at seq %d: %v", k, err)
		}
		if tail != n-k {
			t.Fatalf("checkpoint at seq %d: folded %d events after it; want %d (the checkpoint was not used)", k, tail, n-k)
		}
		sameLoad(t, "checkpoint at seq "+strconv.Itoa(k), got)
	}
}

// A checkpoint that no longer matches the record, is garbled, or is gone
// costs a whole fold and nothing else: the record is the truth.
func TestCheckpointThatDoesNotMatchIsIgnored(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"bash"}})
	b.add(record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Usage: usage(100, 10)})
	b.add(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"ls"}`})
	b.log.Close()
	st, err := runstate.Load(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteCheckpoint(); err != nil {
		t.Fatal(err)
	}
	cpPath := filepath.Join(b.dir, runstate.CheckpointFile)
	good, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(b.dir, record.EventsFile)
	orig, _ := os.ReadFile(events)
	cases := []struct {
		name   string
		break_ func()
	}{
		{"deleted", func() { os.Remove(cpPath) }},
		{"garbled", func() { os.WriteFile(cpPath, good[:len(good)/2], 0o644) }},
		{"another version", func() {
			header, body, _ := strings.Cut(string(good), "\n")
			os.WriteFile(cpPath, []byte(regexp.MustCompile(`"version":\d+`).ReplaceAllString(header, `"version":99`)+"\n"+body), 0o644)
		}},
		{"the covered line edited", func() {
			os.WriteFile(events, []byte(strings.Replace(string(orig), `"command\":\"ls\"`, `"command\":\"rm\"`, 1)), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(cpPath, good, 0o644)
			os.WriteFile(events, orig, 0o644)
			c.break_()
			got, tail, err := runstate.LoadFrom(b.dir)
			if err != nil {
				t.Fatal(err)
			}
			if tail != 3 {
				t.Errorf("folded %d events; want the whole record (3)", tail)
			}
			sameLoad(t, c.name, got)
		})
	}
}

// A view (LoadViewFrom, for show, status and runs) is the whole fold but
// the file provenance, from the checkpoint plus its tail as from the
// record alone; it never writes a checkpoint, so the next whole load
// still gets the provenance.
func TestViewIsTheFoldWithoutFiles(t *testing.T) {
	dir := teamRecord(t)
	whole, err := runstate.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Files.Files) == 0 {
		t.Fatal("the team run wrote no file: nothing to leave out")
	}
	check := func(what string) {
		t.Helper()
		view, _, err := runstate.LoadViewFrom(dir)
		if err != nil {
			t.Fatal(err)
		}
		if view.Files != nil {
			t.Fatalf("%s: the view holds the file provenance", what)
		}
		want := *whole.State
		want.Files = nil
		if !reflect.DeepEqual(view.State, &want) {
			t.Fatalf("%s: the view differs from the fold:\n%s", what, diffFields(view.State, &want))
		}
		if err := view.WriteCheckpoint(); err == nil {
			t.Fatalf("%s: a view wrote a checkpoint", what)
		}
		full, _, err := runstate.LoadFrom(dir)
		if err != nil || !reflect.DeepEqual(full.Files, whole.Files) {
			t.Fatalf("%s: the whole load after the view: %v, files differ %v", what, err, !reflect.DeepEqual(full.Files, whole.Files))
		}
	}
	check("from the run's checkpoint")
	// A checkpoint mid-run: the view folds the tail without provenance.
	events, err := os.ReadFile(filepath.Join(dir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(filepath.Join(dir, record.HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := record.Cut(dir, int(whole.Seq/2)); err != nil {
		t.Fatal(err)
	}
	mid, err := runstate.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := mid.WriteCheckpoint(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, record.EventsFile), events, 0o644)
	os.WriteFile(filepath.Join(dir, record.HeadFile), head, 0o644)
	if _, tail, err := runstate.LoadViewFrom(dir); err != nil || tail == 0 || int64(tail) >= whole.Seq {
		t.Fatalf("the mid-run checkpoint did not serve the view: tail %d, %v", tail, err)
	}
	check("from a checkpoint mid-run")
	os.Remove(filepath.Join(dir, runstate.CheckpointFile))
	check("without a checkpoint")
}
