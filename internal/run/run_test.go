package run_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// script plays one list of calls per turn; a turn past the end is an error,
// so a run that should have stopped earlier fails loudly.
func script(turns ...[]llm.ToolCall) scripted.Policy {
	return func(turn int, _ *llm.Request) (*llm.Response, error) {
		if turn >= len(turns) {
			return nil, fmt.Errorf("script: no turn %d", turn)
		}
		return scripted.Calls(turns[turn]...), nil
	}
}

func call(name string, args any) llm.ToolCall { return scripted.Call(name, args) }

func finish(summary string) []llm.ToolCall {
	return []llm.ToolCall{call("finish", map[string]string{"summary": summary})}
}

// config is a run under a fresh home with a fixed id.
func config(t *testing.T, id string, p scripted.Policy) run.Config {
	t.Helper()
	return run.Config{
		Home:      t.TempDir(),
		Objective: "test objective",
		Model:     scripted.New(p),
		ModelInfo: record.ModelSettings{Provider: "scripted"},
		NewID:     func() string { return id },
		Settings:  run.Settings{MaxAttempts: 1},
	}
}

func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(content string) string {
	h := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(h[:])
}

func decode[T any](t *testing.T, e record.Event) T {
	t.Helper()
	var v T
	if err := e.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkClosedRecord asserts what every run that ends in this process
// guarantees: run_started first, run_finished last and agreeing with the
// summary, and the files it lists hashed as they are on disk.
func checkClosedRecord(t *testing.T, s run.Summary) (record.RunStarted, record.RunFinished, []record.Event) {
	t.Helper()
	events := runtest.Events(t, s.RunDir)
	if len(events) < 2 || events[0].Type != record.TypeRunStarted || events[len(events)-1].Type != record.TypeRunFinished {
		t.Fatalf("record does not run from run_started to run_finished: %d events", len(events))
	}
	if n, m := len(runtest.OfType(events, record.TypeRunStarted)), len(runtest.OfType(events, record.TypeRunFinished)); n != 1 || m != 1 {
		t.Fatalf("run_started %d times, run_finished %d times", n, m)
	}
	rs := decode[record.RunStarted](t, events[0])
	rf := decode[record.RunFinished](t, events[len(events)-1])
	if rs.RunID != s.RunID || filepath.Base(s.RunDir) != s.RunID {
		t.Fatalf("run id %q in record, %q in summary, dir %s", rs.RunID, s.RunID, s.RunDir)
	}
	if rf.Termination != s.Termination || rf.Status != s.Status || rf.Summary != s.Summary || rf.Error != s.Error ||
		rf.Turns != s.Turns || rf.ToolCalls != s.ToolCalls || rf.Usage != s.Usage {
		t.Fatalf("run_finished %+v disagrees with summary %+v", rf, s)
	}
	if len(rf.Files) != len(s.Files) {
		t.Fatalf("run_finished lists %d files, summary %d", len(rf.Files), len(s.Files))
	}
	for i, f := range s.Files {
		if rf.Files[i] != f {
			t.Fatalf("file %d: record %+v, summary %+v", i, rf.Files[i], f)
		}
		data, err := os.ReadFile(filepath.Join(s.RunDir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatalf("listed file %s: %v", f.Path, err)
		}
		if f.SHA256 != sum(string(data)) || f.Bytes != int64(len(data)) {
			t.Fatalf("listed file %s: %s %d bytes, on disk %s %d bytes", f.Path, f.SHA256, f.Bytes, sum(string(data)), len(data))
		}
	}
	return rs, rf, events
}

func TestExecute(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T, cfg *run.Config)
		policy scripted.Policy
		check  func(t *testing.T, cfg run.Config, s run.Summary, rs record.RunStarted, events []record.Event)
	}{{
		name: "completed, inputs copied without links",
		setup: func(t *testing.T, cfg *run.Config) {
			in := t.TempDir()
			put(t, filepath.Join(in, "a.txt"), "alpha\n")
			put(t, filepath.Join(in, "sub", "b.txt"), "beta\n")
			for link, target := range map[string]string{"leak": "/etc/passwd", "etc": "/etc", "sub/rel": "../a.txt"} {
				if err := os.Symlink(target, filepath.Join(in, link)); err != nil {
					t.Fatal(err)
				}
			}
			cfg.InputsDir = in
		},
		policy: script(
			[]llm.ToolCall{call("read_file", map[string]string{"path": "/inputs/a.txt"}), call("write_file", map[string]string{"path": "report.txt", "content": "alpha seen\n"})},
			finish("wrote report.txt"),
		),
		check: func(t *testing.T, cfg run.Config, s run.Summary, rs record.RunStarted, events []record.Event) {
			if s.Status != run.StatusCompleted || s.Termination != string(agent.Completed) || s.Summary != "wrote report.txt" || s.Error != "" {
				t.Fatalf("summary %+v", s)
			}
			if s.Turns != 2 || s.ToolCalls != 3 {
				t.Fatalf("turns %d tool calls %d, want 2 and 3", s.Turns, s.ToolCalls)
			}
			if rs.Objective != cfg.Objective || rs.Model.Provider != "scripted" {
				t.Fatalf("run_started %+v", rs)
			}
			wantInputs := []record.FileEntry{
				{Path: "/inputs/a.txt", SHA256: sum("alpha\n"), Bytes: 6},
				{Path: "/inputs/sub/b.txt", SHA256: sum("beta\n"), Bytes: 5},
			}
			if fmt.Sprint(rs.Inputs) != fmt.Sprint(wantInputs) {
				t.Fatalf("inputs in run_started %+v, want %+v", rs.Inputs, wantInputs)
			}
			for _, f := range wantInputs {
				data, err := os.ReadFile(filepath.Join(s.RunDir, filepath.FromSlash(f.Path)))
				if err != nil || sum(string(data)) != f.SHA256 {
					t.Fatalf("copied input %s: %q %v", f.Path, data, err)
				}
			}
			for _, link := range []string{"leak", "etc", "sub/rel"} {
				if _, err := os.Lstat(filepath.Join(s.RunDir, "inputs", link)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("symlink inputs/%s was copied (err %v)", link, err)
				}
			}
			if len(s.Files) != 1 || s.Files[0].Path != "/workspace/report.txt" || s.Files[0].SHA256 != sum("alpha seen\n") {
				t.Fatalf("files %+v", s.Files)
			}
			for _, e := range runtest.OfType(events, record.TypeToolResult) {
				if tr := decode[record.ToolResult](t, e); tr.IsError {
					t.Fatalf("%s failed: %s", tr.Name, tr.Output)
				}
			}
		},
	}, {
		name:  "turn budget",
		setup: func(t *testing.T, cfg *run.Config) { cfg.Budget = record.BudgetSettings{MaxTurns: 2} },
		policy: script(
			[]llm.ToolCall{call("list_files", map[string]string{"path": "/workspace"})},
			[]llm.ToolCall{call("list_files", map[string]string{"path": "/workspace"})},
		),
		check: func(t *testing.T, cfg run.Config, s run.Summary, rs record.RunStarted, events []record.Event) {
			if s.Termination != string(agent.BudgetTurns) || s.Status != run.StatusStopped || s.Turns != 2 {
				t.Fatalf("summary %+v", s)
			}
			if !strings.Contains(s.Error, "turn budget") {
				t.Fatalf("error %q does not name the budget", s.Error)
			}
			if rs.Budget.MaxTurns != 2 {
				t.Fatalf("budget in run_started %+v", rs.Budget)
			}
		},
	}, {
		name: "no sandbox is a recorded warning",
		setup: func(t *testing.T, cfg *run.Config) {
			cfg.Sandbox = "none"
			cfg.Progress = &bytes.Buffer{}
		},
		policy: script(
			[]llm.ToolCall{call("bash", map[string]string{"command": "echo hi > f"})},
			finish("made f"),
		),
		check: func(t *testing.T, cfg run.Config, s run.Summary, rs record.RunStarted, events []record.Event) {
			if s.Sandbox != "none" || rs.Sandbox.Kind != "none" {
				t.Fatalf("sandbox %q in summary, %+v in record", s.Sandbox, rs.Sandbox)
			}
			warnings := runtest.OfType(events, record.TypeWarning)
			if len(warnings) != 1 || warnings[0].Seq > runtest.OfType(events, record.TypeToolCall)[0].Seq {
				t.Fatalf("want one warning before the first command, got %d", len(warnings))
			}
			w := decode[record.Warning](t, warnings[0])
			if w.Code != "no_sandbox" || len(s.Warnings) != 1 || s.Warnings[0] != w.Message {
				t.Fatalf("warning %+v, summary warnings %q", w, s.Warnings)
			}
			if out := cfg.Progress.(*bytes.Buffer).String(); !strings.Contains(out, "WARNING: "+w.Message) {
				t.Fatalf("progress does not show the warning: %q", out)
			}
			// The command ran in the workspace, on the host.
			if s.Status != run.StatusCompleted || len(s.Files) != 1 || s.Files[0].Path != "/workspace/f" || s.Files[0].SHA256 != sum("hi\n") {
				t.Fatalf("summary %+v", s)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, "20260101-000000-abcdef", tc.policy)
			tc.setup(t, &cfg)
			s, err := run.Execute(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(cfg.Home, "runs", "20260101-000000-abcdef"); s.RunDir != want {
				t.Fatalf("run dir %s, want %s", s.RunDir, want)
			}
			rs, _, events := checkClosedRecord(t, s)
			tc.check(t, cfg, s, rs, events)
		})
	}
}

func TestExecuteConfigErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, cfg *run.Config)
		want  string
	}{
		{"missing inputs", func(t *testing.T, cfg *run.Config) {
			cfg.InputsDir = filepath.Join(t.TempDir(), "nope")
		}, "does not exist"},
		{"inputs is a file", func(t *testing.T, cfg *run.Config) {
			cfg.InputsDir = filepath.Join(t.TempDir(), "file")
			put(t, cfg.InputsDir, "x")
		}, "not a directory"},
		{"home under a regular file", func(t *testing.T, cfg *run.Config) {
			file := filepath.Join(t.TempDir(), "file")
			put(t, file, "x")
			cfg.Home = filepath.Join(file, "home")
		}, "writable directory"},
		{"no model", func(t *testing.T, cfg *run.Config) { cfg.Model = nil }, "no model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, "20260101-000000-abcdef", script(finish("never")))
			tc.setup(t, &cfg)
			_, err := run.Execute(context.Background(), cfg)
			var ce *run.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *run.ConfigError, got %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(cfg.Home, "runs")); err == nil {
				t.Fatalf("a failed start left %s behind", filepath.Join(cfg.Home, "runs"))
			}
		})
	}
}

func TestInputsDirMayBeASymlink(t *testing.T) {
	// The user named this directory; only links inside it are not followed.
	in := t.TempDir()
	put(t, filepath.Join(in, "a.txt"), "alpha\n")
	link := filepath.Join(t.TempDir(), "inputs-link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "20260101-000000-abcdef", script(finish("done")))
	cfg.InputsDir = link
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs, _, _ := checkClosedRecord(t, s)
	if len(rs.Inputs) != 1 || rs.Inputs[0].Path != "/inputs/a.txt" {
		t.Fatalf("inputs given as a symlink to a directory: run_started lists %+v, want /inputs/a.txt", rs.Inputs)
	}
}

func TestInputsContainingHomeAreRefused(t *testing.T) {
	// `apodex run --inputs ~` with the default home ~/.apodex: copying the
	// inputs would copy the new run into itself, and every earlier run.
	in := t.TempDir()
	put(t, filepath.Join(in, "a.txt"), "alpha\n")
	cfg := config(t, "20260101-000000-abcdef", script(finish("done")))
	cfg.Home = filepath.Join(in, ".apodex")
	cfg.InputsDir = in
	_, err := run.Execute(context.Background(), cfg)
	var ce *run.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *run.ConfigError, got %T %v", err, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Home, "runs", "20260101-000000-abcdef")); err == nil {
		t.Fatalf("the refused run left its directory behind: %.200v", ce)
	}
}

func TestDirLoadList(t *testing.T) {
	home := t.TempDir()
	ids := []string{"20260101-000000-aaaaaa", "20260101-000000-aaaabb", "20260102-000000-cccccc"}
	summaries := map[string]run.Summary{}
	for i, id := range ids {
		cfg := config(t, id, script(
			[]llm.ToolCall{call("write_file", map[string]string{"path": "n.txt", "content": fmt.Sprint(i)})},
			finish(fmt.Sprint("run ", i)),
		))
		cfg.Home = home
		s, err := run.Execute(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		summaries[id] = s
	}
	if err := os.Mkdir(filepath.Join(home, "runs", "broken"), 0o755); err != nil { // no record
		t.Fatal(err)
	}
	put(t, filepath.Join(home, "runs", "stray-file"), "not a run") // not listed

	runs := filepath.Join(home, "runs")
	for _, tc := range []struct {
		id, want, errText string
	}{
		{id: ids[0], want: filepath.Join(runs, ids[0])},
		{id: "20260102", want: filepath.Join(runs, ids[2])},
		{id: "20260101-000000-aaaab", want: filepath.Join(runs, ids[1])},
		{id: "20260101-000000-aaaa", errText: "matches 2 runs"},
		{id: "2027", errText: "no such run"},
		{id: "", errText: "no such run"},
		{id: "../runs/" + ids[0], errText: "no such run"},
	} {
		got, err := runview.Dir(home, tc.id)
		switch {
		case tc.errText == "" && (err != nil || got != tc.want):
			t.Errorf("Dir(%q) = %q, %v; want %q", tc.id, got, err, tc.want)
		case tc.errText != "" && (!errors.Is(err, runview.ErrNotFound) || !strings.Contains(err.Error(), tc.errText)):
			t.Errorf("Dir(%q) = %q, %v; want ErrNotFound saying %q", tc.id, got, err, tc.errText)
		}
	}

	for _, id := range ids {
		s := summaries[id]
		info, err := runview.Load(s.RunDir)
		if err != nil {
			t.Fatal(err)
		}
		if info.RunID != id || info.RunDir != s.RunDir || info.Objective != "test objective" || info.Status != s.Status ||
			info.Termination != s.Termination || info.Summary != s.Summary || info.Turns != s.Turns ||
			info.ToolCalls != s.ToolCalls || info.Usage != s.Usage || info.Finished == nil || info.TornTail {
			t.Fatalf("Load disagrees with the summary:\n%+v\n%+v", info, s)
		}
		if fmt.Sprint(info.Files) != fmt.Sprint(s.Files) || len(info.Steps) != 2 || info.Steps[0].Tool != "write_file" || info.ToolErrors != 0 {
			t.Fatalf("files %+v steps %+v", info.Files, info.Steps)
		}
		if info.Events != len(runtest.Events(t, s.RunDir)) {
			t.Fatalf("events %d", info.Events)
		}
	}

	list, err := runview.List(home)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, info := range list {
		got = append(got, info.RunID+"="+strings.SplitN(info.Status, ":", 2)[0])
	}
	want := []string{"broken=unreadable", ids[2] + "=completed", ids[1] + "=completed", ids[0] + "=completed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List = %v, want %v", got, want)
	}

	if list, err := runview.List(t.TempDir()); list != nil || err != nil {
		t.Fatalf("List of an empty home = %v, %v", list, err)
	}
}

func TestDirFindsOnlyRuns(t *testing.T) {
	home := t.TempDir()
	cfg := config(t, "20260101-000000-aaaaaa", script(finish("done")))
	cfg.Home = home
	if _, err := run.Execute(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(home, "runs", "stray-file"), "not a run")
	// None of these names a run: "." and ".." are the runs directory and
	// home, and a file under runs/ is not a run directory.
	for _, id := range []string{".", "..", "stray-file", "stray"} {
		if got, err := runview.Dir(home, id); !errors.Is(err, runview.ErrNotFound) {
			t.Errorf("Dir(%q) = %q, %v; want ErrNotFound", id, got, err)
		}
	}
}

func TestLoadMarksTheFailedCallOfATurn(t *testing.T) {
	// Two calls of one tool in one turn, the first failing.
	cfg := config(t, "20260101-000000-abcdef", script(
		[]llm.ToolCall{call("list_files", map[string]string{"path": "/workspace/missing"}), call("list_files", map[string]string{"path": "/workspace"})},
		finish("done"),
	))
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := runview.Load(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	if info.ToolErrors != 1 || len(info.Steps) != 3 {
		t.Fatalf("tool errors %d, steps %+v", info.ToolErrors, info.Steps)
	}
	if !info.Steps[0].IsError || info.Steps[1].IsError {
		t.Fatalf("the failed call is step 0, got is_error %v and %v", info.Steps[0].IsError, info.Steps[1].IsError)
	}
}

func TestLoadTornTail(t *testing.T) {
	cfg := config(t, "20260101-000000-abcdef", script(finish("done")))
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A crash while run_finished was being written: its line is cut in two.
	path := filepath.Join(s.RunDir, record.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.TrimSuffix(data, []byte("\n"))
	cut := bytes.LastIndexByte(body, '\n') + 1
	last := body[cut:]
	if !bytes.Contains(last, []byte(`"type":"run_finished"`)) {
		t.Fatalf("last line is not run_finished: %s", last)
	}
	if err := os.WriteFile(path, append(body[:cut:cut], last[:len(last)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}

	info, err := runview.Load(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.TornTail || info.Status != run.StatusRunning || info.Finished != nil || info.Termination != "" {
		t.Fatalf("torn record loaded as %+v", info)
	}
	if want := bytes.Count(data, []byte("\n")) - 1; info.Events != want {
		t.Fatalf("events %d, want %d", info.Events, want)
	}
	list, err := runview.List(cfg.Home)
	if err != nil || len(list) != 1 || list[0].Status != run.StatusRunning {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestCancelKillsTheCommandAndClosesTheRecord(t *testing.T) {
	runtest.NeedSandbox(t)
	// A unique duration makes the sleep findable among the host's processes.
	arg := fmt.Sprintf("30.%d", time.Now().UnixNano())
	cfg := config(t, "20260101-000000-abcdef", script(
		[]llm.ToolCall{call("bash", map[string]string{"command": "sleep " + arg})},
		finish("should not get here"),
	))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	seen := make(chan bool, 1)
	wg.Go(func() {
		defer cancel()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if len(processesWithArg(arg)) > 0 {
				seen <- true
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		seen <- false
	})
	s, err := run.Execute(ctx, cfg)
	cancel() // stops the watcher if the sleep never showed up
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !<-seen {
		t.Fatal("the sleep never started")
	}
	if s.Termination != string(agent.Cancelled) || s.Status != run.StatusFailed {
		t.Fatalf("summary %+v", s)
	}
	_, rf, events := checkClosedRecord(t, s)
	if rf.Termination != string(agent.Cancelled) {
		t.Fatalf("run_finished %+v", rf)
	}
	results := runtest.OfType(events, record.TypeToolResult)
	if len(results) != 1 || !decode[record.ToolResult](t, results[0]).IsError {
		t.Fatalf("want the interrupted bash call recorded as failed, got %d results", len(results))
	}
	if pids := processesWithArg(arg); len(pids) > 0 {
		t.Fatalf("sleep %s still running after the run ended: pids %v", arg, pids)
	}
}

// processesWithArg lists the pids whose command line has arg as an argument.
// It is called from the watching goroutine, so it does not fail the test.
func processesWithArg(arg string) []string {
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline") // the pattern is valid
	var pids []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		for _, a := range bytes.Split(data, []byte{0}) {
			if string(a) == arg {
				pids = append(pids, filepath.Base(filepath.Dir(f)))
			}
		}
	}
	return pids
}
