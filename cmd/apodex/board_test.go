package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// demoRun runs a bundled example with the scripted model and returns the
// home and the run id. extra are more `apodex run` flags.
func demoRun(t *testing.T, wantCode int, extra ...string) (home, id string) {
	t.Helper()
	home = t.TempDir()
	args := append([]string{"run", "--home", home, "--provider", "scripted", "--quiet", "--json"}, extra...)
	code, out, errOut := cli(t, args...)
	if code != wantCode {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, wantCode, out, errOut)
	}
	return home, decodeSummary(t, out).RunID
}

func teamDemo(t *testing.T) (home, id string) {
	t.Helper()
	return demoRun(t, 0, "--mode", "team", "--script", "../../examples/team-csv/script.json",
		"--inputs", "../../examples/team-csv/inputs", "Sum north and south, then report")
}

func csvDemo(t *testing.T) (home, id string) {
	t.Helper()
	return demoRun(t, 0, "--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
}

// failedDemo is the csv-sum task with an agent that finishes at once.
func failedDemo(t *testing.T) (home, id string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"turns": [{"calls": [{"name": "finish", "args": {"summary": "done"}}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return demoRun(t, 1, "--script", script, "--task", "../../examples/csv-sum/task.yaml")
}

// The text views of a team run, a react run and a failed run.
func TestBoardAndShowText(t *testing.T) {
	teamHome, teamID := teamDemo(t)
	csvHome, csvID := csvDemo(t)
	failHome, failID := failedDemo(t)
	board := []string{
		`(?m)^T1\s+resolved\s+North total\s+-\s+-\s+2\s+north.txt holds 361.75`,
		`(?m)^T2\s+resolved\s+South total`,
		`(?m)^T3\s+resolved\s+Report\s+T1,T2\s`,
		`3 items: 0 open, 0 in progress, 3 resolved, 0 cancelled`,
		`(?m)^A1\s+T1\s+CSV summer \(north\)\s+reported`,
		`(?m)^A2\s+T2\s+CSV summer \(south\)\s+reported`,
		`(?m)^A3\s+T3\s+report writer\s+reported`,
		`\(finished, completed\)`,
	}
	cases := []struct {
		name      string
		args      []string
		code      int
		want      []string // regexps on stdout
		wantErr   string
		notWanted []string
	}{
		{"board", []string{"board", "--home", teamHome, teamID}, 0, board, "", nil},
		{"board by id prefix", []string{"board", "--home", teamHome, teamID[:len(teamID)-2]}, 0, board[:1], "", nil},
		{"board --watch of a finished run", []string{"board", "--watch", "--home", teamHome, teamID}, 0, board, "", nil},
		{"board of a react run", []string{"board", "--home", csvHome, csvID}, 0,
			[]string{`^this run has no task board \(it ran in react mode\)\n$`}, "", nil},
		{"board --watch of a react run", []string{"board", "--watch", "--home", csvHome, csvID}, 0,
			[]string{`^this run has no task board \(it ran in react mode\)\n$`}, "", nil},
		{"board of an unknown run", []string{"board", "--home", teamHome, "20990101-000000-abcdef"}, 2, nil, "no such run", nil},
		{"board without a run", []string{"board", "--home", teamHome}, 2, nil, "give one run id", nil},
		{"show --artifacts", []string{"show", "--artifacts", "--home", csvHome, csvID}, 0, []string{
			`(?m)^\s+8 B\s+[0-9a-f]{12}\s+main\s+/outputs/sum\.txt ← bash#\d+ ← /inputs/data\.csv$`,
			`/outputs/report\.md ← write_file#\d+`,
			`lease: free; manifest: /outputs/report\.md, /outputs/sum\.txt`,
		}, "", []string{"missing:"}},
		{"show of a team run", []string{"show", "--home", teamHome, teamID}, 0, []string{
			`mode:\s+team`,
			`(?m)^\s+AGENT\s+ROLE\s+PARENT\s+ITEM\s+STATE\s+TURNS\s+TOOLS\s+ERRORS\s+ACTIVE\s+FROM→TO$`,
			`(?m)^\s+lead\s+lead\s+-\s+-\s+-\s+13\s+18\s+2\s`,
			`(?m)^\s+A1\s+CSV summer \(north\)\s+lead\s+T1\s+reported\s+2\s+2\s+0\s+\S+\s+\+\S+→\+\S+$`,
			`(?m)^\s+A3\s+report writer\s+lead\s+T3\s+reported\s+3\s+4\s+0\s`,
			`(?m)^\s+V1\s+verifier\s+lead\s+-\s+-\s`,
			`(?m)^\s+V2\s+verifier\s+lead\s+-\s+-\s`,
			`(?m)^delivery:\s+ok$`,
		}, "", nil},
		{"show of a verified run", []string{"show", "--home", csvHome, csvID}, 0, []string{
			`(?m)^delivery:\s+ok$`,
			`(?m)^\s+delivered\s+/outputs/sum\.txt\s+8 bytes\s+by main$`,
			`(?m)^verification: (\d+) of \d+ passed$`,
			`(?m)^\s+passed\s+verify\[0\] "sum matches an independent recomputation" \(recompute\)`,
		}, "", []string{"failures:", "FAILED"}},
		{"show of a failed run", []string{"show", "--home", failHome, failID}, 0, []string{
			`(?m)^delivery:\s+FAILED`,
			`(?m)^\s+FAILED\s+check exists /outputs/sum\.txt: missing`,
			`(?m)^failures:\s+\d+$`,
			`(?m)^\s+- deliverable /outputs/sum\.txt was not delivered`,
		}, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			for _, re := range tc.want {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("stdout does not match %s:\n%s", re, out)
				}
			}
			for _, s := range tc.notWanted {
				if strings.Contains(out, s) {
					t.Errorf("stdout shows %q:\n%s", s, out)
				}
			}
			if tc.wantErr != "" {
				oneLineMessage(t, errOut, tc.wantErr)
			}
			noCrashText(t, out, errOut)
		})
	}
}

// board --json is the folded board as data; show --json has the agents
// with the record's tool counts.
func TestBoardAndShowJSON(t *testing.T) {
	home, id := teamDemo(t)
	code, out, errOut := cli(t, "board", "--json", "--home", home, id)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var v struct {
		Mode        string                   `json:"mode"`
		Finished    bool                     `json:"finished"`
		Items       []board.Item             `json:"items"`
		Assignments []runview.AssignmentInfo `json:"assignments"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("board --json: %v\n%s", err, out)
	}
	if v.Mode != "team" || !v.Finished || len(v.Items) != 3 || len(v.Assignments) != 3 {
		t.Fatalf("board --json: %+v", v)
	}
	for i, it := range v.Items {
		if it.State != board.Resolved || len(it.History) == 0 || it.Objective == "" {
			t.Errorf("item %d: %+v", i, it)
		}
	}
	if deps := strings.Join(v.Items[2].Deps, ","); deps != "T1,T2" {
		t.Errorf("T3 deps %q", deps)
	}
	for _, a := range v.Assignments {
		if a.State != "reported" || a.Item == "" || a.Role == "" {
			t.Errorf("assignment %+v", a)
		}
	}

	code, out, _ = cli(t, "show", "--json", "--home", home, id)
	var info runview.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
		t.Fatalf("show --json: exit %d\n%s", code, out)
	}
	calls := map[string]int{}
	for _, e := range runtest.Events(t, filepath.Join(home, "runs", id)) {
		if e.Type == record.TypeToolCall {
			calls[e.Agent]++
		}
	}
	var agents []string
	for _, a := range info.Agents {
		agents = append(agents, a.Agent)
		if a.ToolCalls != calls[a.Agent] {
			t.Errorf("%s: %d tool calls, the record has %d", a.Agent, a.ToolCalls, calls[a.Agent])
		}
	}
	// Each verifier the lead's two verify calls started is an agent of its
	// own, with its role, parent and activity (usage) too (the two run at
	// once: either may appear first).
	if got := strings.Join(agents, " "); got != "lead A1 A2 V1 V2 A3" && got != "lead A1 A2 V2 V1 A3" {
		t.Errorf("agents %q", got)
	}
	for _, a := range info.Agents {
		if strings.HasPrefix(a.Agent, "V") && (a.Role != "verifier" || a.Parent != "lead" || a.Turns == 0) {
			t.Errorf("verifier %+v; want role verifier, parent lead, its turns", a)
		}
	}
}

// show --artifacts --json: provenance as data, and the control state.
func TestShowArtifactsJSON(t *testing.T) {
	home, id := csvDemo(t)
	code, out, errOut := cli(t, "show", "--artifacts", "--json", "--home", home, id)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var v struct {
		Artifacts []struct {
			Path       string `json:"path"`
			Producer   string `json:"producer"`
			Action     string `json:"action"`
			Line       string `json:"line"`
			Provenance []struct {
				Hops []struct{ Kind, Label string }
			} `json:"provenance"`
		} `json:"artifacts"`
		Control struct {
			Manifest []string `json:"manifest"`
			Delivery *struct {
				OK bool `json:"ok"`
			} `json:"delivery"`
		} `json:"control"`
		Missing []string `json:"missing"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, a := range v.Artifacts {
		if a.Path != "/outputs/sum.txt" {
			continue
		}
		found = true
		if len(a.Provenance) != 1 {
			t.Fatalf("provenance %+v", a.Provenance)
		}
		hops := a.Provenance[0].Hops
		var labels []string
		for _, h := range hops {
			labels = append(labels, h.Kind+":"+h.Label)
		}
		want := "file:/outputs/sum.txt action:" + a.Action + " file:/inputs/data.csv"
		if got := strings.Join(labels, " "); got != want || !strings.HasPrefix(a.Action, "bash#") {
			t.Errorf("chain %q, want %q", got, want)
		}
		if a.Line != "/outputs/sum.txt ← "+a.Action+" ← /inputs/data.csv" || a.Producer != "main" {
			t.Errorf("line %q producer %q", a.Line, a.Producer)
		}
	}
	if !found {
		t.Errorf("no /outputs/sum.txt among %+v", v.Artifacts)
	}
	if strings.Join(v.Control.Manifest, " ") != "/outputs/report.md /outputs/sum.txt" || v.Control.Delivery == nil || !v.Control.Delivery.OK || len(v.Missing) != 0 {
		t.Errorf("control %+v, missing %v", v.Control, v.Missing)
	}
}

// syncBuffer is a bytes.Buffer that a watcher writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --watch follows a run as its record grows and stops by itself when the
// run finishes. The live run is a real team record replayed line by line.
func TestBoardWatchFollowsALiveRun(t *testing.T) {
	srcHome, srcID := teamDemo(t)
	data, err := os.ReadFile(filepath.Join(srcHome, "runs", srcID, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	// Cut the record just after T1 was assigned: T1 in progress, T2 open.
	cut := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"board"`) && strings.Contains(l, `"op":"assign"`) {
			cut = i + 1
			break
		}
	}
	if cut < 0 {
		t.Fatal("the team record has no assign event")
	}
	for _, tc := range []struct {
		name  string
		json  bool
		first string // a regexp the live board shows
	}{
		{"text", false, `(?m)^T1\s+in_progress\s+North total\s+-\s+A1\s`},
		{"json", true, `"id":"T1".*"state":"in_progress"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "runs", srcID)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, record.EventsFile)
			if err := os.WriteFile(path, []byte(strings.Join(lines[:cut], "")), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang, not a measure
			defer cancel()
			args := []string{"board", "--watch", "--home", home, srcID}
			if tc.json {
				args = append(args, "--json")
			}
			var out, errOut syncBuffer
			done := make(chan int)
			go func() { done <- Run(ctx, args, &out, &errOut) }()

			first := regexp.MustCompile(tc.first)
			for !first.MatchString(out.String()) {
				select {
				case code := <-done:
					t.Fatalf("--watch returned %d before the run finished\n%s%s", code, out.String(), errOut.String())
				case <-ctx.Done():
					t.Fatalf("the live board never showed %s:\n%s", tc.first, out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(strings.Join(lines[cut:], ""))
			f.Close()

			code := <-done
			if ctx.Err() != nil {
				t.Fatal("--watch did not stop by itself when the run finished")
			}
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errOut.String())
			}
			got := out.String()
			if tc.json {
				objs := strings.Split(strings.TrimSpace(got), "\n")
				if len(objs) < 2 {
					t.Fatalf("want one JSON object per change, got:\n%s", got)
				}
				var last struct {
					Finished bool         `json:"finished"`
					Items    []board.Item `json:"items"`
				}
				if err := json.Unmarshal([]byte(objs[len(objs)-1]), &last); err != nil || !last.Finished || len(last.Items) != 3 {
					t.Errorf("last object %+v, %v", last, err)
				}
				return
			}
			if n := strings.Count(got, "· board at event"); n < 2 {
				t.Errorf("the board was printed %d times, want the live one and the final one:\n%s", n, got)
			}
			if !strings.Contains(got[strings.LastIndex(got, "· board at event"):], "3 resolved") {
				t.Errorf("the last board printed is not the final one:\n%s", got)
			}
		})
	}
}

// --watch stops at once when the user interrupts it.
func TestBoardWatchStopsOnInterrupt(t *testing.T) {
	home, id := teamDemo(t)
	events := filepath.Join(home, "runs", id, record.EventsFile)
	data, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	// Drop run_finished: the run looks live forever.
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if err := os.WriteFile(events, []byte(strings.Join(lines[:len(lines)-1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int)
	go func() { done <- Run(ctx, []string{"board", "--watch", "--home", home, id}, &out, &errOut) }()
	guard := time.After(time.Minute) // against a hang, not a measure
	for !strings.Contains(out.String(), "(running)") {
		select {
		case code := <-done:
			t.Fatalf("--watch of a live run returned %d by itself\n%s%s", code, out.String(), errOut.String())
		case <-guard:
			t.Fatalf("the live board never showed:\n%s%s", out.String(), errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after an interrupt\n%s", code, errOut.String())
	}
}
