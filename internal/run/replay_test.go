package run_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/sandbox"
)

// copyDir copies the regular files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// csvSumRun runs the csv-sum demo from a copy of its directory (so a test
// may change the task file afterwards) and returns the summary and the copy.
func csvSumRun(t *testing.T) (run.Summary, string) {
	t.Helper()
	task := t.TempDir()
	copyDir(t, "../../examples/csv-sum", task)
	c, err := contract.Load(filepath.Join(task, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := scripted.Load(filepath.Join(task, "script.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "csv-sum", nil)
	cfg.Objective, cfg.Contract, cfg.Model, cfg.Sandbox = "", c, m, runtest.SandboxKind()
	cfg.Budget.MaxTurns, cfg.Budget.MaxToolCalls = c.Budget.Turns, c.Budget.ToolCalls
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		t.Fatalf("the demo ended %s (%s): %s", s.Status, s.Termination, s.Error)
	}
	return s, task
}

func replayOf(t *testing.T, dir string) replay.Report {
	t.Helper()
	rep, err := replay.Run(context.Background(), dir, replay.Config{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func mustBeIdentical(t *testing.T, rep replay.Report) {
	t.Helper()
	if !rep.Identical || rep.Divergence != nil {
		t.Fatalf("replay diverged: %+v\nnotes: %v", rep.Divergence, rep.Notes)
	}
	if len(rep.Notes) > 0 {
		t.Errorf("notes on an identical replay: %v", rep.Notes)
	}
	if rep.Compared.ToolCalls == 0 || rep.Compared.Observations != rep.Compared.ToolCalls || rep.Compared.FinalFiles == 0 {
		t.Errorf("compared %+v", rep.Compared)
	}
}

func TestReplayIdentical(t *testing.T) {
	runtest.NeedSandbox(t)
	t.Run("csv-sum demo", func(t *testing.T) {
		s, _ := csvSumRun(t)
		if !s.Trainable || len(s.NotTrainable) > 0 {
			t.Errorf("the demo is not trainable: %v", s.NotTrainable)
		}
		rep := replayOf(t, s.RunDir)
		mustBeIdentical(t, rep)
		if rep.Compared.ToolCalls != s.ToolCalls || rep.Compared.FileChanges != 2 || rep.Compared.FinalFiles != 2 {
			t.Errorf("compared %+v; the run made %d tool calls", rep.Compared, s.ToolCalls)
		}
	})
	t.Run("team example", func(t *testing.T) {
		// Each replay races two subagents again; the gate must keep the
		// recorded order of their ends every time.
		s, _ := teamRun(t)
		for range 3 {
			mustBeIdentical(t, replayOf(t, s.RunDir))
		}
	})
	t.Run("loop ended by a model error", func(t *testing.T) {
		cfg := config(t, "ended", func(turn int, _ *llm.Request) (*llm.Response, error) {
			if turn == 0 {
				return scripted.Calls(call("write_file", map[string]string{"path": "a.txt", "content": "a\n"})), nil
			}
			return nil, fmt.Errorf("the provider is gone")
		})
		s, err := run.Execute(context.Background(), cfg)
		if err != nil || s.Termination != "model_error" {
			t.Fatalf("%v %+v", err, s)
		}
		mustBeIdentical(t, replayOf(t, s.RunDir))
	})
	t.Run("loop ended by the soft deadline", func(t *testing.T) {
		// The original's model is slow and the deadline stops it in a call;
		// the replay's turns come at once, and its own deadline stops it in
		// the same call, which makes the same salvage call.
		cfg := config(t, "soft", func(turn int, _ *llm.Request) (*llm.Response, error) {
			time.Sleep(200 * time.Millisecond)
			return scripted.Calls(call("write_file", map[string]string{"path": "x.txt", "content": strings.Repeat("x", turn+1)})), nil
		})
		cfg.SoftDeadline = record.Duration(time.Second)
		s, err := run.Execute(context.Background(), cfg)
		if err != nil || s.Termination != "soft_deadline" || s.Partial == "" {
			t.Fatalf("%v %+v", err, s)
		}
		mustBeIdentical(t, replayOf(t, s.RunDir))
	})
}

// A replay runs the tools for real: a command whose output depends on the
// moment it runs is reported at the first place it shows, with what the
// record says and what happened.
func TestReplayReportsTheFirstDivergence(t *testing.T) {
	runtest.NeedSandbox(t)
	cases := []struct {
		name    string
		command string
		kind    string
		typ     string // the event the divergence is at
	}{
		{"in the observation", "date +%s%N", replay.KindObservation, record.TypeToolResult},
		{"in a file only", "date +%s%N > /workspace/now.txt", replay.KindFile, record.TypeFileDelta},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, "clock", script(
				[]llm.ToolCall{call("write_file", map[string]string{"path": "steady.txt", "content": "same every time\n"})},
				[]llm.ToolCall{call("bash", map[string]string{"command": tc.command})},
				finish("done"),
			))
			s, err := run.Execute(context.Background(), cfg)
			if err != nil || s.Status != run.StatusCompleted {
				t.Fatalf("%v %+v", err, s)
			}
			var at record.Event
			for _, e := range runtest.Events(t, s.RunDir) {
				if e.Type == tc.typ && (strings.Contains(string(e.Raw), `"name":"bash"`) || strings.Contains(string(e.Raw), `"path":"/workspace/now.txt"`)) {
					at = e
					break
				}
			}
			rep := replayOf(t, s.RunDir)
			d := rep.Divergence
			if rep.Identical || d == nil {
				t.Fatalf("a clock read replayed identical: %+v", rep)
			}
			if d.Kind != tc.kind || d.Seq != at.Seq || d.Agent != "main" || d.Expected == d.Got || d.Expected == "" || d.Got == "" {
				t.Fatalf("divergence %+v, want kind %s at seq %d (%s) of main", d, tc.kind, at.Seq, tc.typ)
			}
			if rep.Compared.ToolCalls < 2 {
				t.Errorf("the calls before the divergence were not compared: %+v", rep.Compared)
			}
		})
	}
}

// Issue #25: a replay tells noise from divergence. What a command prints
// that cannot repeat (the file times and inode numbers of ls -l, ls -li,
// --full-time and stat, date's clock) is reported as nondeterministic
// output and the replay is identical; a clock read in nanoseconds is an
// environment divergence, in the observation, in the file it went to and
// in the final files, all reported with their class: the comparison goes
// on past the first.
func TestReplayClassifiesDifferences(t *testing.T) {
	runtest.NeedSandbox(t)
	look := call("bash", map[string]string{"command": "ls -l /workspace; ls -li --full-time /workspace; stat /workspace/steady.txt; date"})
	t.Run("noise only", func(t *testing.T) {
		cfg := config(t, "noise", script(
			[]llm.ToolCall{call("write_file", map[string]string{"path": "steady.txt", "content": "same every time\n"})},
			[]llm.ToolCall{look},
			finish("done"),
		))
		s, err := run.Execute(context.Background(), cfg)
		if err != nil || s.Status != run.StatusCompleted {
			t.Fatalf("%v %+v", err, s)
		}
		rep := replayOf(t, s.RunDir)
		mustBeIdentical(t, rep)
		if len(rep.Divergences) != 1 || rep.Classes[replay.ClassNoise] != 1 || rep.Divergences[0].Kind != replay.KindObservation {
			t.Fatalf("divergences %+v", rep.Divergences)
		}
		for _, rule := range []string{"file times", "inode numbers", "clock times"} {
			if !strings.Contains(rep.Divergences[0].What, rule) {
				t.Errorf("%q does not name %s", rep.Divergences[0].What, rule)
			}
		}
	})
	t.Run("noise and the environment", func(t *testing.T) {
		cfg := config(t, "clock", script(
			[]llm.ToolCall{call("write_file", map[string]string{"path": "steady.txt", "content": "same every time\n"})},
			[]llm.ToolCall{look},
			[]llm.ToolCall{call("bash", map[string]string{"command": "date +%s%N"})},
			[]llm.ToolCall{call("bash", map[string]string{"command": "date +%s%N > /workspace/now.txt"})},
			finish("done"),
		))
		s, err := run.Execute(context.Background(), cfg)
		if err != nil || s.Status != run.StatusCompleted {
			t.Fatalf("%v %+v", err, s)
		}
		rep := replayOf(t, s.RunDir)
		var got []string
		for _, d := range rep.Divergences {
			got = append(got, d.Class+" "+d.Kind)
		}
		want := []string{"nondeterministic_output observation", "environment observation", "environment file", "environment final_files"}
		if rep.Identical || strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("divergences %q, want %q", got, want)
		}
		if d := rep.Divergence; d == nil || d.Class != replay.ClassEnvironment || d.Seq != rep.Divergences[1].Seq {
			t.Errorf("the first divergence %+v is not the first environment one", d)
		}
		if rep.Classes[replay.ClassEnvironment] != 3 || rep.Classes[replay.ClassNoise] != 1 || rep.Classes[replay.ClassPolicy] != 0 {
			t.Errorf("classes %v", rep.Classes)
		}
	})
}

// What the record says is what the replay is held to: a result edited in
// the record is the divergence, at its seq.
func TestReplayHoldsToTheRecord(t *testing.T) {
	runtest.NeedSandbox(t)
	s, _ := csvSumRun(t)
	path := filepath.Join(s.RunDir, record.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for _, e := range runtest.Events(t, s.RunDir) {
		if e.Type == record.TypeToolResult && strings.Contains(string(e.Raw), "6637.00") {
			seq = e.Seq
			break
		}
	}
	edited := bytes.Replace(data, []byte("sum=6637.00"), []byte("sum=6637.01"), 1)
	if seq == 0 || bytes.Equal(edited, data) {
		t.Fatal("the demo's record has no sum result to edit")
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	// As edited, the record fails its hash chain just after the result.
	_, err = replay.Run(context.Background(), s.RunDir, replay.Config{TempDir: t.TempDir()})
	if !errors.Is(err, record.ErrTampered) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d was edited", seq)) {
		t.Fatalf("replay of an edited record: %v", err)
	}
	// Rechained (anyone can: the chain has no key), it replays, and the
	// edited result is the divergence.
	if err := record.Reseal(s.RunDir); err != nil {
		t.Fatal(err)
	}
	rep := replayOf(t, s.RunDir)
	if d := rep.Divergence; d == nil || d.Kind != replay.KindObservation || d.Seq != seq || !strings.Contains(d.Expected, "6637.01") || !strings.Contains(d.Got, "6637.00") {
		t.Fatalf("divergence %+v, want the edited result at seq %d", rep.Divergence, seq)
	}
}

func TestReplayChangedInput(t *testing.T) {
	s, _ := csvSumRun(t)
	if err := os.WriteFile(filepath.Join(s.RunDir, "inputs", "data.csv"), []byte("id,value\n1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := replayOf(t, s.RunDir)
	d := rep.Divergence
	if rep.Identical || d == nil || d.Kind != replay.KindInitialState || d.Seq != 1 || !strings.Contains(d.Got, "/inputs/data.csv changed") {
		t.Fatalf("report %+v, divergence %+v", rep, d)
	}
	if rep.Compared != (replay.Compared{}) {
		t.Errorf("something was replayed from a changed initial state: %+v", rep.Compared)
	}
	ok, why := runview.Trainability(s.RunDir)
	if ok || len(why) != 1 || !strings.HasPrefix(why[0], "the initial state cannot be rebuilt: /inputs/data.csv changed") {
		t.Fatalf("trainable %v: %q", ok, why)
	}
	info, err := runview.Load(s.RunDir)
	if err != nil || info.Trainable || fmt.Sprint(info.NotTrainable) != fmt.Sprint(why) {
		t.Fatalf("Load: %v trainable %v %q", err, info.Trainable, info.NotTrainable)
	}
}

func TestReplayRefuses(t *testing.T) {
	cfg := config(t, "none", script(finish("nothing")))
	cfg.Sandbox = "none"
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Run(context.Background(), s.RunDir, replay.Config{TempDir: t.TempDir()})
	var cerr *run.ConfigError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "--sandbox none") {
		t.Fatalf("replaying an unisolated run without consent: %v", err)
	}
	// An unfinished run (its run_finished cut off) is not replayed.
	path := filepath.Join(s.RunDir, record.EventsFile)
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	os.WriteFile(path, bytes.Join(lines[:len(lines)-1], nil), 0o644)
	_, err = replay.Run(context.Background(), s.RunDir, replay.Config{TempDir: t.TempDir(), Sandbox: "none"})
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "finished") {
		t.Fatalf("replaying an unfinished run: %v", err)
	}
}

func TestTrainability(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, dir, task string)
		want  []string // prefixes of the reasons, in order; none: trainable
	}{
		{"a clean run", func(*testing.T, string, string) {}, nil},
		// The run keeps its task: what happens to the task file later does
		// not matter; losing the run's copy does.
		{"task file changed", func(t *testing.T, _, task string) {
			appendTo(t, filepath.Join(task, "tests", "check.sh"), "\n# changed\n")
		}, nil},
		{"task file gone", func(t *testing.T, _, task string) {
			os.RemoveAll(task)
		}, nil},
		{"task blob gone", func(t *testing.T, dir, _ string) {
			rec, _ := record.Read(dir)
			for _, e := range rec.Events {
				var ce record.Contract
				if e.Type == record.TypeContract && e.Decode(&ce) == nil && ce.TaskRef != "" {
					p, _ := record.BlobPath(dir, ce.TaskRef)
					os.Remove(p)
				}
			}
		}, []string{"the record is incomplete: blob sha256:"}},
		{"input missing", func(t *testing.T, dir, _ string) {
			os.Remove(filepath.Join(dir, "inputs", "data.csv"))
		}, []string{"the initial state cannot be rebuilt: /inputs/data.csv is missing"}},
		{"input added", func(t *testing.T, dir, _ string) {
			put(t, filepath.Join(dir, "inputs", "extra.csv"), "x\n")
		}, []string{"the initial state cannot be rebuilt: /inputs/extra.csv was added"}},
		{"blob missing", func(t *testing.T, dir, _ string) {
			blobs, _ := filepath.Glob(filepath.Join(dir, record.BlobsDir, "*"))
			for _, b := range blobs {
				os.Remove(b)
			}
		}, []string{"the record is incomplete: "}},
		{"no run_finished", func(t *testing.T, dir, _ string) { // a kill just before it
			c, _ := record.Read(dir)
			if err := record.Cut(dir, len(c.Events)-1); err != nil {
				t.Fatal(err)
			}
		}, []string{"the record is incomplete: the run has not finished"}},
		{"run_finished dropped", func(t *testing.T, dir, _ string) { // by hand: the head still names it
			path := filepath.Join(dir, record.EventsFile)
			data, _ := os.ReadFile(path)
			data = bytes.TrimSuffix(data, []byte("\n"))
			os.WriteFile(path, data[:bytes.LastIndexByte(data, '\n')+1], 0o644)
		}, []string{"the record was changed after it was written: ", "the record is incomplete: the run has not finished"}},
		{"record edited", func(t *testing.T, dir, _ string) {
			path := filepath.Join(dir, record.EventsFile)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, bytes.Replace(data, []byte("sum=6637.00"), []byte("sum=6637.01"), 1), 0o644)
		}, []string{"the record was changed after it was written: line "}},
		{"torn tail", func(t *testing.T, dir, _ string) {
			appendTo(t, filepath.Join(dir, record.EventsFile), `{"seq":999,"ty`)
		}, []string{"the record is incomplete: its last line is torn"}},
		{"seq gap", func(t *testing.T, dir, _ string) {
			appendTo(t, filepath.Join(dir, record.EventsFile), `{"seq":999,"time":"2026-01-01T00:00:00Z","type":"warning","agent":""}`+"\n")
		}, []string{"the record is incomplete: record: seq gap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, task := csvSumRun(t)
			tc.spoil(t, s.RunDir, task)
			ok, why := runview.Trainability(s.RunDir)
			if ok != (len(tc.want) == 0) || len(why) != len(tc.want) {
				t.Fatalf("trainable %v, reasons %q; want %q", ok, why, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(why[i], w) {
					t.Errorf("reason %q, want %q…", why[i], w)
				}
			}
		})
	}
	t.Run("no isolation", func(t *testing.T) {
		cfg := config(t, "none", script(finish("nothing")))
		cfg.Sandbox = "none"
		s, err := run.Execute(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Trainable || len(s.NotTrainable) != 1 || s.NotTrainable[0] != "isolation was off (--sandbox none)" {
			t.Fatalf("summary: trainable %v %q", s.Trainable, s.NotTrainable)
		}
	})
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReplay measures replay speed in events of the original record
// per second (the replay runs every tool for real, in the sandbox).
func BenchmarkReplay(b *testing.B) {
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		b.Skip(err)
	}
	long := func(n int) scripted.Policy {
		return func(turn int, _ *llm.Request) (*llm.Response, error) {
			if turn >= n {
				return scripted.Calls(scripted.Call("finish", map[string]string{"summary": "done"})), nil
			}
			return scripted.Calls(scripted.Call("write_file", map[string]string{"path": fmt.Sprintf("f%03d.txt", turn%50), "content": fmt.Sprintf("step %d\n", turn)})), nil
		}
	}
	team, err := scripted.Load("../../examples/team-csv/script.json")
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  func(cfg *run.Config)
	}{
		{"team-csv", func(cfg *run.Config) {
			cfg.Model, cfg.Mode, cfg.InputsDir = team, run.ModeTeam, "../../examples/team-csv/inputs"
		}},
		{"write_file-300", func(cfg *run.Config) {
			cfg.Model = scripted.New(long(300))
			cfg.Budget.MaxTurns = 400
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cfg := run.Config{Home: b.TempDir(), Objective: "bench", ModelInfo: record.ModelSettings{Provider: "scripted"},
				Settings: run.Settings{MaxAttempts: 1}, NewID: func() string { return "bench" }}
			tc.cfg(&cfg)
			s, err := run.Execute(context.Background(), cfg)
			if err != nil || s.Status != run.StatusCompleted {
				b.Fatalf("%v %+v", err, s)
			}
			var events int
			b.ResetTimer()
			for b.Loop() {
				rep, err := replay.Run(context.Background(), s.RunDir, replay.Config{TempDir: b.TempDir()})
				if err != nil || !rep.Identical {
					b.Fatalf("%v %+v", err, rep.Divergence)
				}
				events += rep.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
