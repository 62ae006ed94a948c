package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// notFlags are the settings no flag of apodex run sets, and why. A new
// setting must be bound to a flag (and given a value below) or named here.
var notFlags = map[string]string{
	"Settings.World":                    "recorded from --world (TestWorldRun)",
	"Settings.MCP":                      "the configured MCP servers (config, --mcp-config, the task's mcp key; TestMCPConfigJSONAndHTTP)",
	"Settings.Instructions":             "recorded from the AGENTS.md files found (TestProjectInstructionsReachTheSystemPrompt)",
	"Settings.Repo":                     "recorded from --repo (TestRepoRunDiffApply)",
	"Settings.NetworkAllow":             "recorded from --network-allow, which needs --network without host (TestNetworkAllowE2E)",
	"Settings.Context.KeepRecent":       "no flag: the default",
	"Settings.Context.KeepTail":         "no flag: the default",
	"Settings.Team.SubBudget.MaxTokens": "no flag: the default",
}

// TestRunFlagsReachTheRecord: every flag of apodex run that sets a
// setting, given a value that is not its default, is in run_started's
// settings as given, and every setting is set by a flag (or is in
// notFlags); the run, stopped after its first events, resumes with them
// read back from the record.
func TestRunFlagsReachTheRecord(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	corpus := filepath.Join(work, "corpus")
	os.MkdirAll(corpus, 0o755)
	os.WriteFile(filepath.Join(corpus, "a.md"), []byte("# A\n\nThe harbour light was relit in 1921.\n"), 0o644)
	task := filepath.Join(work, "task.yaml")
	os.WriteFile(task, []byte("objective: the file's objective\n"), 0o644)
	script := filepath.Join(work, "script.json")
	os.WriteFile(script, []byte(`{"agents": {"lead": {"turns": [{"calls": [{"name": "finish", "args": {"summary": "done"}}]}]}}}`), 0o644)
	args := []string{"run", "--home", home, "--provider", "scripted", "--script", script, "--quiet",
		"--task", task, "--objective-override", "the objective as typed", "--corpus", corpus,
		"--max-turns", "7", "--max-tool-calls", "9", "--max-tokens", "99999", "--timeout", "1h", "--soft-deadline", "50m",
		"--context-window", "50000", "--compact-at", "0.9", "--compact-to", "0.4", "--command-timeout", "90s", "--retries", "2",
		"--scratch-quota", "1MiB", "--sandbox", "none", "--network", "host", "--fetch-private",
		"--mem-limit", "1GiB", "--pids-limit", "99", "--tmp-size", "32MiB", "--workspace-quota", "3GiB", "--workspace-files", "5000", "--workspace-share", "2MiB",
		"--mode", "team", "--concurrency", "3", "--isolation", "shared", "--plan", "--sub-max-turns", "4", "--sub-max-tool-calls", "5",
		"--verify-max-turns", "3", "--effort", "off", "--effort-width", "3", "--effort-waves", "1", "--effort-budget", "10", "--synthesis", "off",
		"--sub-timeout", "5m", "--merge-ignore", "*.tmp", "--require-finish"}
	code, _, stderr := cli(t, args...)
	if code == cmdline.ExitUsage || strings.Contains(stderr, "panic") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dir := onlyRun(t, home)
	want := run.Settings{
		Mode: run.ModeTeam,
		Team: record.TeamSettings{Concurrency: 3, Isolation: "shared", Plan: true, SubBudget: record.BudgetSettings{MaxTurns: 4, MaxToolCalls: 5},
			SubTimeout: record.Duration(5 * time.Minute), MergeIgnore: []string{"*.tmp"},
			VerifyMaxTurns: 3, Effort: "off", EffortWidth: 3, EffortWaves: 1, EffortBudget: 10, Synthesis: "off"},
		Budget:       record.BudgetSettings{MaxTurns: 7, MaxToolCalls: 9, MaxTokens: 99999},
		Context:      record.ContextSettings{Window: 50000, At: 0.9, To: 0.4, KeepRecent: 2, KeepTail: 6},
		SoftDeadline: record.Duration(50 * time.Minute), Timeout: record.Duration(time.Hour),
		Sandbox: "none", Network: true, HostNetwork: true,
		Limits:         record.LimitSettings{MemLimit: 1 << 30, PidsLimit: 99, TmpSize: 32 << 20, WorkspaceQuota: 3 << 30, WorkspaceFiles: 5000, WorkspaceShare: 2 << 20},
		CommandTimeout: record.Duration(90 * time.Second), ScratchQuota: 1 << 20, MaxAttempts: 2,
		TaskFile: task, U0: "the objective as typed", RequireFinish: true,
		Evidence: record.EvidenceSettings{Corpus: true, FetchPrivate: true},
	}
	rec, err := run.ReadStarted(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.Settings, want) {
		t.Errorf("run_started settings\n got %+v\nwant %+v", rec.Settings, want)
	}
	defaults := run.Defaults()
	var walk func(got, def reflect.Value, path string)
	walk = func(got, def reflect.Value, path string) {
		if got.Kind() == reflect.Struct {
			for i := range got.NumField() {
				walk(got.Field(i), def.Field(i), path+"."+got.Type().Field(i).Name)
			}
			return
		}
		if _, ok := notFlags[path]; !ok && reflect.DeepEqual(got.Interface(), def.Interface()) {
			t.Errorf("%s is recorded as its default %v: bind it to a flag of apodex run and give it another value here, or name it in notFlags", path, got)
		}
	}
	walk(reflect.ValueOf(rec.Settings), reflect.ValueOf(defaults), "Settings")

	// Stopped after the contract event, it resumes from the record with
	// the run's --sandbox none accepted again.
	if err := record.Cut(dir, 2); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir)); code == 0 || !strings.Contains(stderr, "--sandbox none") {
		t.Fatalf("resume of a run recorded without a sandbox, without --sandbox none: exit %d, %s", code, stderr)
	}
	code, _, stderr = cli(t, "resume", "--home", home, "--quiet", "--sandbox", "none", filepath.Base(dir))
	if code == cmdline.ExitUsage || strings.Contains(stderr, "panic") {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if after, err := run.ReadStarted(dir); err != nil || !reflect.DeepEqual(after.Settings, want) {
		t.Errorf("after resume the settings read %+v (%v)", after.Settings, err)
	}
}
