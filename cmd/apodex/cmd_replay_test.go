package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
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
	if code != 1 || !strings.HasPrefix(out, "divergence at seq 1: environment initial_state") || !strings.Contains(out, "1 divergence: 1 environment") || !strings.Contains(out, "/inputs/data.csv changed") {
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
	var info runview.Info
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
		{[]string{"replay", "--home", home}, cmdline.ExitUsage, "give one run id"},
		{[]string{"replay", "--home", home, "nope"}, cmdline.ExitUsage, "apodex runs"},
		{[]string{"replay", "--home", home, "--sandbox", "bwrap", "x"}, cmdline.ExitUsage, "--sandbox"},
	}
	for _, c := range cases {
		code, out, errOut := cli(t, c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.hint) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errOut)
		}
		oneLineMessage(t, errOut)
	}
}

// tamperSandbox edits the run's recorded ask for a sandbox to none, as
// someone with write access to the run directory could, and checks the
// record still says what isolated it.
func tamperSandbox(t *testing.T, dir string) {
	t.Helper()
	rewriteFirstLine(t, dir, func(first string) string {
		if !strings.Contains(first, `"sandbox":{"kind":"bwrap"`) && !strings.Contains(first, `"sandbox":{"kind":"native"`) {
			t.Fatalf("run_started does not name an isolating sandbox: %s", first)
		}
		edited := strings.Replace(first, `"sandbox":"auto"`, `"sandbox":"none"`, 1)
		if edited == first {
			t.Fatalf("no settings.sandbox to tamper with in %s", first)
		}
		return edited
	})
}

// rewriteFirstLine replaces the first line of dir's record (run_started)
// by edit's answer, as someone with write access to the run could.
func rewriteFirstLine(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, record.EventsFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(data), "\n")
	if err := os.WriteFile(p, []byte(edit(first)+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// refusedAsTampered checks that command refuses the record of dir, whose
// line 1 was edited, naming where its hash chain breaks (issue #25).
func refusedAsTampered(t *testing.T, dir string, args ...string) {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code == 0 || !strings.Contains(errOut, "the record was changed after it was written: line 2 (seq 2)") || !strings.Contains(errOut, "seq 1 was edited") {
		t.Fatalf("%s of a record whose line 1 was edited: exit %d\n%s%s", args[0], code, out, errOut)
	}
}

// A record is input from outside (issue #25, F2): with run_started's
// settings.sandbox edited to none in a sandboxed run, replay and resume
// refuse, naming both recorded values, and run it (unisolated) only with
// the user's --sandbox none.
func TestTamperedSandboxRefused(t *testing.T) {
	t.Run("replay", func(t *testing.T) {
		runtest.NeedSandbox(t)
		home := t.TempDir()
		code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--json", "--quiet",
			"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
		if code != 0 {
			t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
		}
		s := decodeSummary(t, out)
		tamperSandbox(t, s.RunDir)
		refusedAsTampered(t, s.RunDir, "replay", "--home", home, s.RunID)
		// Behind the chain, which has no key, the fields are checked.
		if err := record.Reseal(s.RunDir); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
		if code != cmdline.ExitUsage || !strings.Contains(errOut, `run_started.sandbox.kind is "`+s.Sandbox+`"`) || !strings.Contains(errOut, `run_started.settings.sandbox is "none"`) {
			t.Fatalf("replay of the tampered record: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = cli(t, "replay", "--home", home, "--sandbox", "none", s.RunID)
		if code == cmdline.ExitUsage || !strings.Contains(errOut, "replayed run "+s.RunID) {
			t.Fatalf("replay --sandbox none: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, _ := cli(t, "show", "--home", home, s.RunID); code != 0 || !strings.Contains(out, s.Sandbox) {
			t.Errorf("show of the tampered record:\n%s", out)
		}
	})
	t.Run("resume", func(t *testing.T) {
		home, dir := stoppedExample(t, 6)
		tamperSandbox(t, dir)
		refusedAsTampered(t, dir, "resume", "--home", home, "--quiet", filepath.Base(dir))
		if err := record.Reseal(dir); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
		if code != cmdline.ExitUsage || !strings.Contains(errOut, "run_started.sandbox.kind is") || !strings.Contains(errOut, `run_started.settings.sandbox is "none"`) {
			t.Fatalf("resume of the tampered record: exit %d\n%s%s", code, out, errOut)
		}
		if evs := runtest.Events(t, dir); len(evs) != 6 {
			t.Fatalf("the refused resume wrote to the record: %d events", len(evs))
		}
		// It runs (the example's commands, which name the planes by their
		// sandbox paths, fail on the host; the run ends without completing).
		code, out, errOut = cli(t, "resume", "--home", home, "--quiet", "--sandbox", "none", filepath.Base(dir))
		if code == cmdline.ExitUsage || !strings.Contains(out, "record: ") {
			t.Fatalf("resume --sandbox none: exit %d\n%s%s", code, out, errOut)
		}
		var unisolated bool
		for _, w := range decodeAll[record.Warning](t, runtest.Events(t, dir)[6:], record.TypeWarning) {
			unisolated = unisolated || w.Code == "no_sandbox"
		}
		if !unisolated {
			t.Error("the resumed segment ran without isolation but recorded no no_sandbox warning")
		}
	})
}

// The red team's second pass (issue #25): a rechained record whose
// settings.limits were raised (pids_limit 64 removed: the default 512)
// while run_started.sandbox still says 64 is refused naming both, by replay
// and resume; and a record whose settings.network_allow was widened to the
// metadata range replays only when the user gives every recorded prefix
// again.
func TestRecordCannotRaiseLimitsOrWidenTheNetwork(t *testing.T) {
	runtest.NeedSandbox(t)
	// editFirst edits run_started in dir's record (the last match of from)
	// and rechains it, as anyone with write access could.
	editFirst := func(dir, from, to string) {
		t.Helper()
		rewriteFirstLine(t, dir, func(first string) string {
			i := strings.LastIndex(first, from)
			if i < 0 {
				t.Fatalf("no %s in run_started: %s", from, first)
			}
			return first[:i] + to + first[i+len(from):]
		})
		if err := record.Reseal(dir); err != nil {
			t.Fatal(err)
		}
	}
	raised := func(what string, code int, out, errOut string) {
		t.Helper()
		if code != cmdline.ExitUsage || !strings.Contains(errOut, "run_started.sandbox.pids_limit is 64") || !strings.Contains(errOut, "run_started.settings.limits.pids_limit is 512") {
			t.Errorf("%s of a record whose settings' pids_limit was removed: exit %d\n%s%s", what, code, out, errOut)
		}
	}
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--json", "--quiet", "--pids-limit", "64",
		"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
	}
	s := decodeSummary(t, out)
	editFirst(s.RunDir, `"pids_limit":64,`, ``)
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	raised("replay", code, out, errOut)
	editFirst(s.RunDir, `"limits":{`, `"limits":{"pids_limit":64,`) // sandbox and settings agree again
	editFirst(s.RunDir, `"settings":{`, `"settings":{"network_allow":["169.254.0.0/16","10.0.0.0/8"],`)
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	if code != cmdline.ExitUsage || !strings.Contains(errOut, "169.254.0.0/16, 10.0.0.0/8 (run_started.settings.network_allow)") || !strings.Contains(errOut, "--network-allow 169.254.0.0/16,10.0.0.0/8") {
		t.Fatalf("replay of a record with an allow-list the user did not give: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "replay", "--home", home, "--network-allow", "10.0.0.0/8", s.RunID)
	if code != cmdline.ExitUsage || !strings.Contains(errOut, "169.254.0.0/16") {
		t.Fatalf("replay giving one of the two prefixes: exit %d\n%s%s", code, out, errOut)
	}
	// Given both, the run gets past the consent (and is refused next: an
	// allow-list needs --network, which this run never had).
	code, out, errOut = cli(t, "replay", "--home", home, "--network-allow", "169.254.0.0/16,10.0.0.0/8", s.RunID)
	if strings.Contains(errOut, "is not taken from it") || !strings.Contains(errOut, "needs --network") {
		t.Fatalf("replay giving both prefixes: exit %d\n%s%s", code, out, errOut)
	}

	home, dir := stoppedExample(t, 6)
	first := string(runtest.Events(t, dir)[0].Raw)
	if !strings.Contains(first, `"pids_limit":512`) {
		t.Fatalf("the stopped example's limits: %s", first)
	}
	editFirst(dir, `"pids_limit":512`, `"pids_limit":1024`)
	code, out, errOut = cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
	if code != cmdline.ExitUsage || !strings.Contains(errOut, "run_started.sandbox.pids_limit is 512") || !strings.Contains(errOut, "settings.limits.pids_limit is 1024") {
		t.Errorf("resume of a record whose settings' pids_limit was raised: exit %d\n%s%s", code, out, errOut)
	}
	if evs := runtest.Events(t, dir); len(evs) != 6 {
		t.Fatalf("the refused resume wrote to the record: %d events", len(evs))
	}
	editFirst(dir, `"pids_limit":1024`, `"pids_limit":512`)
	code, out, errOut = cli(t, "resume", "--home", home, "--quiet", "--network-allow", "10.9.0.0/16", filepath.Base(dir))
	if code != cmdline.ExitUsage || !strings.Contains(errOut, "--network-allow: run") || !strings.Contains(errOut, "recorded no network_allow") {
		t.Errorf("resume with a prefix the run never had: exit %d\n%s%s", code, out, errOut)
	}
}
