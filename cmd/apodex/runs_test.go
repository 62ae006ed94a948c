package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/runview"
)

// runsHome is a home with a completed react run that is an eval's rollout,
// a failed react run, and a completed team run.
func runsHome(t *testing.T) (home, rollout, failed, team, evalID string) {
	t.Helper()
	home = t.TempDir()
	ok := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, ok), "--quiet", "--json", "a rollout")...)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	rollout = decodeSummary(t, out).RunID
	bad := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Status: 400, Body: `{"error":{"message":"no","type":"invalid_request_error"}}`}))
	code, out, _ = cli(t, append(openaiArgs(home, bad), "--quiet", "--json", "--retries", "1", "a failure")...)
	if code != 1 {
		t.Fatalf("the failing run: exit %d", code)
	}
	failed = decodeSummary(t, out).RunID
	teamHome, teamID := teamDemo(t)
	copyTree(t, filepath.Join(teamHome, "runs", teamID), filepath.Join(home, "runs", teamID))
	team = teamID
	evalID = "e-20260101-000000-abc123"
	os.MkdirAll(filepath.Join(home, "evals", evalID), 0o755)
	os.WriteFile(filepath.Join(home, "evals", evalID, "started.jsonl"), []byte(`{"world":"w","config":"c","rollout":0,"run_id":"`+rollout+`"}`+"\n"), 0o644)
	return home, rollout, failed, team, evalID
}

// listed is the run ids `apodex runs` prints with args.
func listed(t *testing.T, home string, args ...string) (ids []string, out string) {
	t.Helper()
	code, out, errOut := cli(t, append([]string{"runs", "--home", home}, args...)...)
	if code != 0 {
		t.Fatalf("runs %v: exit %d %s", args, code, errOut)
	}
	for _, l := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, "(") {
			ids = append(ids, f[0])
		}
	}
	slices.Sort(ids) // runs started in the same second sort by their random part
	return ids, out
}

// `runs` hides eval rollouts unless --all or --eval; --status, --kind and
// --since filter.
func TestRunsFilters(t *testing.T) {
	home, rollout, failed, team, evalID := runsHome(t)
	cases := []struct {
		args []string
		want []string
	}{
		{nil, []string{team, failed}},
		{[]string{"--all"}, []string{team, failed, rollout}},
		{[]string{"--eval", "e-2026"}, []string{rollout}},
		{[]string{"--status", "stopped"}, []string{failed}}, // a model error stops a run resumably
		{[]string{"--status", "failed"}, nil},
		{[]string{"--kind", "team"}, []string{team}},
		{[]string{"--kind", "react", "--all"}, []string{failed, rollout}},
		{[]string{"--kind", "eval"}, []string{rollout}},
		{[]string{"--since", "1h"}, []string{team, failed}},
		{[]string{"--since", "2999-01-01"}, nil},
	}
	for _, c := range cases {
		got, out := listed(t, home, c.args...)
		slices.Sort(c.want)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("runs %v lists %v; want %v\n%s", c.args, got, c.want, out)
		}
	}
	if _, out := listed(t, home); !strings.Contains(out, "(1 eval rollouts not shown: --all shows them") {
		t.Errorf("runs does not say a rollout is hidden:\n%s", out)
	}
	if _, out := listed(t, home, "--all"); !regexpLine(out, `^`+rollout+`\s+completed\s+completed\s+react \(`+evalID+`\)`) {
		t.Errorf("runs --all does not name the rollout's eval:\n%s", out)
	}
	for _, args := range [][]string{{"--kind", "giant"}, {"--since", "yesterday"}, {"--eval", "e-1999"}} {
		if code, _, errOut := cli(t, append([]string{"runs", "--home", home}, args...)...); code != 2 {
			t.Errorf("runs %v: exit %d %s", args, code, errOut)
		}
	}
}

// holdLock makes the run in dir look live, as its process would (the
// run's lock held), until the test ends.
func holdLock(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, runview.LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// rm removes runs and refuses a live one; an unknown id removes nothing.
func TestRm(t *testing.T) {
	home, rollout, failed, team, _ := runsHome(t)
	if code, _, errOut := cli(t, "rm", "--home", home, failed, "20000101-nope"); code != 2 || !strings.Contains(errOut, "20000101-nope") {
		t.Errorf("rm with an unknown id: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "runs", failed)); err != nil {
		t.Fatalf("rm removed a run although another id was unknown: %v", err)
	}
	holdLock(t, filepath.Join(home, "runs", team))
	code, out, errOut := cli(t, "rm", "--home", home, failed, team)
	if code != 1 || !strings.Contains(out, "removed "+failed) || !strings.Contains(errOut, "run "+team+" is live") || !strings.Contains(errOut, "apodex cancel "+team) {
		t.Errorf("rm: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "runs", failed)); !os.IsNotExist(err) {
		t.Errorf("the failed run is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "runs", team, "events.jsonl")); err != nil {
		t.Errorf("the live run was touched: %v", err)
	}
	if got, _ := listed(t, home, "--all"); !slices.Equal(got, slices.Sorted(slices.Values([]string{team, rollout}))) {
		t.Errorf("runs after rm: %v", got)
	}
}

// prune removes the runs older than an age, keeps live ones, with
// --keep-failed those that did not complete, and eval rollouts unless
// --all.
func TestPrune(t *testing.T) {
	home, rollout, failed, team, _ := runsHome(t)
	if code, _, errOut := cli(t, "prune", "--home", home); code != 2 || !strings.Contains(errOut, "--older-than") {
		t.Errorf("prune without an age: exit %d %s", code, errOut)
	}
	code, out, _ := cli(t, "prune", "--home", home, "--older-than", "30d")
	if code != 0 || !strings.Contains(out, "removed 0 runs older than 30d") {
		t.Errorf("prune --older-than 30d: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "prune", "--home", home, "--older-than", "0s", "--keep-failed", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove "+team) || strings.Contains(out, failed) || strings.Contains(out, rollout) {
		t.Errorf("prune --dry-run: exit %d\n%s", code, out)
	}
	if got, _ := listed(t, home, "--all"); len(got) != 3 {
		t.Errorf("--dry-run removed runs: %v", got)
	}
	holdLock(t, filepath.Join(home, "runs", failed))
	code, out, _ = cli(t, "prune", "--home", home, "--older-than", "0s", "--all")
	if code != 0 || !strings.Contains(out, "kept "+failed+": it is live") || !strings.Contains(out, "removed "+team) || !strings.Contains(out, "removed "+rollout) {
		t.Errorf("prune --all: exit %d\n%s", code, out)
	}
	if got, _ := listed(t, home, "--all"); strings.Join(got, " ") != failed {
		t.Errorf("runs after prune: %v", got)
	}
}

// show says where a run's outputs and workspace are.
func TestShowSaysWhereTheOutputsAre(t *testing.T) {
	home, _, failed, _, _ := runsHome(t)
	_, out, _ := cli(t, "show", "--home", home, failed)
	dir := filepath.Join(home, "runs", failed)
	if !strings.Contains(out, "outputs:     "+filepath.Join(dir, "outputs")+"\n") || !strings.Contains(out, "workspace:   "+filepath.Join(dir, "workspace")+"\n") {
		t.Errorf("show:\n%s", out)
	}
}
