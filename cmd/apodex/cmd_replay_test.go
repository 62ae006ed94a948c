package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
)

// The checked path from outside: finished runs replay identical; a run
// whose input was changed afterwards reports the divergence and is marked
// not trainable, in show and show --json.
func TestReplayCommand(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--json", "--quiet",
		"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
	}
	s := decodeSummary(t, out)
	if !s.Trainable || len(s.NotTrainable) > 0 {
		t.Errorf("the demo's summary: trainable %v %q", s.Trainable, s.NotTrainable)
	}
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	if code != 0 || out != "identical\n" || !strings.Contains(errOut, "compared 8 tool calls, 8 observations") {
		t.Fatalf("replay: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	code, out, _ = cli(t, "show", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "trainable:   yes\n") {
		t.Errorf("show of a trainable run:\n%s", out)
	}

	if err := os.WriteFile(filepath.Join(s.RunDir, "inputs", "data.csv"), []byte("id,value\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	if code != 1 || !strings.HasPrefix(out, "divergence at seq 1: initial_state") || !strings.Contains(out, "/inputs/data.csv changed") {
		t.Fatalf("replay after the input changed: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cli(t, "replay", "--home", home, "--json", s.RunID)
	var rep replay.Report
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Identical || rep.Divergence == nil || rep.Divergence.Kind != replay.KindInitialState {
		t.Fatalf("replay --json: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "show", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "trainable:   no — the initial state cannot be rebuilt: /inputs/data.csv changed") {
		t.Errorf("show of a run whose input changed:\n%s", out)
	}
	code, out, _ = cli(t, "show", "--home", home, "--json", s.RunID)
	var info run.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Trainable || len(info.NotTrainable) != 1 {
		t.Errorf("show --json: trainable %v %q", info.Trainable, info.NotTrainable)
	}
}

func TestReplayTeamCommand(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--json", "--quiet", "--mode", "team",
		"--script", "../../examples/team-csv/script.json", "--inputs", "../../examples/team-csv/inputs", "Sum north and south, report both")
	if code != 0 {
		t.Fatalf("team demo: exit %d\n%s%s", code, out, errOut)
	}
	s := decodeSummary(t, out)
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	if code != 0 || out != "identical\n" {
		t.Fatalf("replay of the team run: exit %d\n%s%s", code, out, errOut)
	}
}

func TestReplayUsage(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		args []string
		code int
		hint string
	}{
		{[]string{"replay", "--home", home}, exitUsage, "give one run id"},
		{[]string{"replay", "--home", home, "nope"}, exitUsage, "apodex runs"},
		{[]string{"replay", "--home", home, "--sandbox", "bwrap", "x"}, exitUsage, "--sandbox"},
	}
	for _, c := range cases {
		code, out, errOut := cli(t, c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.hint) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errOut)
		}
		oneLineMessage(t, errOut)
	}
}
