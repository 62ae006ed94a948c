package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/world"
)

// genIDs generates worlds with the CLI and returns their ids.
func genIDs(t *testing.T, home string, args ...string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := cli(t, append([]string{"worlds", "gen", "--home", home, "--out", out, "--build"}, args...)...)
	if code != 0 {
		t.Fatalf("worlds gen %v: exit %d: %s", args, code, stderr)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		ids = append(ids, strings.Fields(l)[0])
	}
	return ids
}

func showWorld(t *testing.T, home, id string) world.World {
	t.Helper()
	code, stdout, stderr := cli(t, "worlds", "show", "--home", home, "--json", id)
	if code != 0 {
		t.Fatalf("worlds show: %s", stderr)
	}
	var w world.World
	if err := json.Unmarshal([]byte(stdout), &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWorldsGenIdsLevelsAndCheck(t *testing.T) {
	home := t.TempDir()
	for _, fam := range []string{"file", "search", "code"} {
		a := genIDs(t, home, fam, "--seed", "11", "--count", "2", "--level", "2")
		b := genIDs(t, home, fam, "--seed", "11", "--count", "2", "--level", "2")
		c := genIDs(t, home, fam, "--seed", "13", "--level", "2")
		if strings.Join(a, ",") != strings.Join(b, ",") {
			t.Errorf("%s: the same seeds gave %v then %v", fam, a, b)
		}
		if a[0] == a[1] || c[0] == a[0] || c[0] == a[1] {
			t.Errorf("%s: other seeds share an id: %v %v", fam, a, c)
		}
		hi := genIDs(t, home, fam, "--seed", "11", "--level", "5")
		lo, up := showWorld(t, home, a[0]).Diff, showWorld(t, home, hi[0]).Diff
		key := "acquisition_pressure"
		if fam == "code" {
			key = "failure_distance"
		}
		if up[key] <= lo[key] {
			t.Errorf("%s: level 5 %s %v not above level 2's %v", fam, key, up[key], lo[key])
		}
		if code, stdout, stderr := cli(t, "worlds", "check", "--home", home, hi[0]); code != 0 {
			t.Errorf("%s: worlds check %s: exit %d\n%s%s", fam, hi[0], code, stdout, stderr)
		}
	}
	if code, stdout, _ := cli(t, "worlds", "list", "--home", home); code != 0 || strings.Count(stdout, "\n") != 12 {
		t.Errorf("worlds list: exit %d, %d lines, want 12:\n%s", code, strings.Count(stdout, "\n"), stdout)
	}
	if code, _, stderr := cli(t, "worlds", "show", "--home", home, "w-000000000000"); code != cmdline.ExitFailed || !strings.Contains(stderr, "worlds list") {
		t.Errorf("unknown world: exit %d: %s", code, stderr)
	}
}

func TestRunWorldRecordsTheWorld(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	id := genIDs(t, home, "file", "--seed", "3", "--level", "1")[0]
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
	 {"calls": [{"name": "claim_outputs", "args": {"paths": ["/outputs/total.txt"]}},
	            {"name": "bash", "args": {"command": "awk -F, 'NR>1 {s+=$3} END {printf \"%.2f\\n\", s}' /inputs/orders.csv > /outputs/total.txt"}}]},
	 {"calls": [{"name": "finish", "args": {"summary": "summed"}}]}]}`), 0o644)
	code, stdout, stderr := cli(t, "run", "--home", home, "--world", id, "--provider", "scripted", "--script", script, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("run --world: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if s := decodeSummary(t, stdout); !s.Trainable {
		t.Errorf("a world rollout in bwrap is not trainable: %v", s.NotTrainable)
	}
	dir := onlyRun(t, home)
	evs := runtest.Events(t, dir)
	ws := decodeAll[record.World](t, evs, record.TypeWorld)
	if len(ws) != 1 || ws[0].ID != id || ws[0].Generator.Version == "" || ws[0].Generator.Name != "file" {
		t.Fatalf("world events %+v, want one naming %s and its generator", ws, id)
	}
	var rs record.RunStarted
	evs[0].Decode(&rs)
	if rs.Settings == nil || rs.Settings.World == nil || rs.Settings.World.ID != id {
		t.Errorf("run_started settings do not name the world: %v", rs.Settings)
	}
	// The replay stages the same world again and reproduces the run.
	if code, stdout, stderr := cli(t, "replay", "--home", home, "--json", filepath.Base(dir)); code != 0 || !strings.Contains(stdout, `"identical": true`) {
		t.Errorf("replay of a world rollout: exit %d\n%s%s", code, stdout, stderr)
	}
	// A world whose stored test was replaced after the run makes it not
	// trainable, and no rollout (nor a replay) starts from it (F12).
	w, _ := world.NewStore(home).Get(id)
	p := filepath.Join(w.Dir, "tests", "expected.txt")
	os.Remove(p)
	os.WriteFile(p, []byte("0\n"), 0o444)
	if ok, why := runview.Trainability(dir); ok || !strings.Contains(strings.Join(why, "; "), "world "+id) {
		t.Errorf("trainable after its world was modified: %v %v", ok, why)
	}
	code, _, stderr = cli(t, "run", "--home", home, "--world", id, "--provider", "scripted", "--script", script, "--quiet")
	if code != cmdline.ExitUsage || !strings.Contains(stderr, "tests/expected.txt is not the file stored") {
		t.Errorf("run --world of a world whose test was replaced: exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "replay", "--home", home, filepath.Base(dir)); code == 0 || !strings.Contains(stderr, "tests/expected.txt") {
		t.Errorf("replay from a world whose test was replaced: exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "run", "--home", home, "--world", id, "--task", script, "--provider", "scripted", "--script", script); code != cmdline.ExitUsage || !strings.Contains(stderr, "drop --task") {
		t.Errorf("--world with --task: exit %d: %s", code, stderr)
	}
}

// runAsChild runs the CLI with the arguments a parent test put (as a JSON
// array) in the environment variable env and exits with its code; without
// it the test is skipped (it only runs as the child of parent).
func runAsChild(t *testing.T, env, parent string) {
	raw := os.Getenv(env)
	if raw == "" {
		t.Skip("runs only as the child of " + parent)
	}
	var args []string
	json.Unmarshal([]byte(raw), &args)
	os.Exit(Run(t.Context(), args, os.Stdout, os.Stderr))
}

// TestEvalChildProcess is the eval a test kills; it only runs as a child.
func TestEvalChildProcess(t *testing.T) {
	runAsChild(t, "APODEX_EVAL_CHILD_ARGS", "TestEvalKillAndResume")
}

// TestEvalKillAndResume: three worlds × two configurations × two rollouts
// against a loopback endpoint that plays an agent, one world made slow (its
// model calls hang). The fast rollouts' lines are in results.jsonl while the
// slow ones still run; the eval is killed (SIGKILL); `eval resume`
// completes it without rerunning finished rollouts; `eval show --json`
// reports pass rates with intervals, vectors, lift and compute; --plot
// writes a PNG.
func TestEvalKillAndResume(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	var ids []string
	for _, fam := range []string{"code", "file", "search"} {
		ids = append(ids, genIDs(t, home, fam, "--seed", "2", "--level", "1")[0])
	}
	slow := ids[0]
	st := world.NewStore(home)
	solutions := map[string][]llm.ToolCall{}
	objectives := map[string]string{}
	for _, id := range ids {
		w, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := eval.SolutionCalls(w)
		solutions[id], objectives[id] = cs, w.Manifest.Contract.Objective
	}
	var hang atomic.Bool
	hang.Store(true)
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		first, turn := "", 0
		for _, m := range req.Messages {
			if m.Role == "user" && first == "" {
				first = m.Content
			}
			if m.Role == "assistant" {
				turn++
			}
		}
		usage := &llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}
		if req.Model == "team-model" {
			usage = &llm.Usage{PromptTokens: 300, CompletionTokens: 60, TotalTokens: 360, Reported: true}
		}
		for id, obj := range objectives {
			if !strings.HasPrefix(first, obj) {
				continue
			}
			switch {
			case id == slow && hang.Load():
				return llmtest.Turn{Hang: true}
			case turn == 0:
				return llmtest.Turn{Calls: solutions[id], Usage: usage}
			}
			return llmtest.Turn{Calls: []llm.ToolCall{finish("done")}, Usage: usage}
		}
		return llmtest.Turn{Status: 400}
	})
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf(`name: kill
rollouts: 2
worlds: [{id: %s}, {id: %s}, {id: %s}]
configs:
  - {name: react, provider: openai, base_url: %q, model: react-model}
  - {name: team, mode: team, provider: openai, base_url: %q, model: team-model}
`, ids[0], ids[1], ids[2], srv.URL, srv.URL)), 0o644)

	args, _ := json.Marshal([]string{"eval", suite, "--home", home, "--parallel", "5"})
	child := exec.Command(os.Args[0], "-test.run=^TestEvalChildProcess$")
	child.Env = append(os.Environ(), "APODEX_EVAL_CHILD_ARGS="+string(args))
	var childErr strings.Builder
	child.Stderr = &childErr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var evalID string
	var before []eval.Result
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if m, _ := filepath.Glob(filepath.Join(home, "evals", "e-*")); len(m) == 1 {
			evalID = filepath.Base(m[0])
			before, _ = eval.ReadResults(home, evalID)
			if len(before) == 8 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fast rollouts' 8 lines did not appear while the slow ones ran (have %d)\n%s", len(before), childErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range before {
		if r.World == slow {
			t.Fatalf("a slow rollout finished before the kill: %+v", r)
		}
	}
	child.Process.Kill()
	child.Wait()

	hang.Store(false) // the endpoint answers the slow world from now on
	code, stdout, stderr := cli(t, "eval", "resume", evalID, "--home", home, "--parallel", "4")
	if code != 0 {
		t.Fatalf("eval resume: exit %d\n%s%s", code, stdout, stderr)
	}
	after, _ := eval.ReadResults(home, evalID)
	if len(after) != 12 {
		t.Fatalf("%d lines after resume, want 12", len(after))
	}
	seen := map[string]bool{}
	for i, r := range after {
		k := fmt.Sprint(r.World, r.Config, r.Rollout)
		if seen[k] {
			t.Errorf("rollout %s has two lines", k)
		}
		seen[k] = true
		if i < 8 && r.RunID != before[i].RunID {
			t.Errorf("line %d was rewritten", i)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), home) {
		t.Errorf("an overlay of the killed eval is still mounted under %s", home)
	}

	plot := filepath.Join(t.TempDir(), "eval.png")
	code, stdout, stderr = cli(t, "eval", "show", evalID, "--home", home, "--json", "--plot", plot)
	if code != 0 {
		t.Fatalf("eval show: %s", stderr)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Done != 12 || len(rep.Configs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, c := range rep.Configs {
		if c.PassRate != 1 || c.Interval[0] <= 0 || c.Interval[0] >= 1 || c.Interval[1] != 1 || c.Mean.Tokens == 0 || c.Mean.Completeness == nil {
			t.Errorf("%s: %+v", c.Name, c)
		}
	}
	if r := rep.Configs[1].ComputeRatio; rep.Configs[1].Lift != 0 || r == nil || *r < 2.9 || *r > 3.1 {
		t.Errorf("team: lift %v, compute ratio %v; want 0 and 3", rep.Configs[1].Lift, r)
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("--plot did not write a PNG: %v", err)
	}
	// The text names the plotted numbers: one row per configuration.
	code, stdout, stderr = cli(t, "eval", "show", evalID, "--home", home, "--plot", plot)
	if code != 0 {
		t.Fatalf("eval show: %s", stderr)
	}
	for _, c := range rep.Configs {
		row := fmt.Sprintf("%.0f %9.3f %9.3f %9.3f", c.Mean.Tokens, c.PassRate, c.Interval[0], c.Interval[1])
		if !strings.Contains(stdout, row) {
			t.Errorf("eval show --plot: no row %q for %s in\n%s", row, c.Name, stdout)
		}
	}
}

// TestBundledSuitesLoad: the example suites parse, and the offline one
// runs to completion with every rollout passing.
func TestBundledSuitesLoad(t *testing.T) {
	for _, p := range []string{"../../examples/suite/suite.yaml", "../../examples/suite/oracle.yaml"} {
		if _, err := eval.LoadSuite(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	runtest.NeedSandbox(t)
	home := t.TempDir()
	code, stdout, stderr := cli(t, "eval", "../../examples/suite/oracle.yaml", "--home", home, "--parallel", "2", "--quiet")
	if code != 0 {
		t.Fatalf("eval oracle.yaml: exit %d\n%s%s", code, stdout, stderr)
	}
	id := strings.Fields(stdout)[1]
	id = strings.TrimSuffix(id, ":")
	rs, err := eval.ReadResults(home, id)
	if err != nil || len(rs) != 24 {
		t.Fatalf("%d results (%v), want 24", len(rs), err)
	}
	for _, r := range rs {
		if r.Correct != 1 {
			t.Errorf("%s %s #%d failed: %s %s", r.WorldName, r.Config, r.Rollout, r.Status, r.Error)
		}
	}
}

// F12 with a rewrite in place: a stored file rewritten at the same size
// (same inode, same directory: only its stat tells) lets the rollout
// start, since its files' stats are checked while the first commands run,
// but its result is refused: not completed, not trainable, and the record
// says why, naming the file.
func TestRunWorldRefusesAStoreFileRewrittenInPlace(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	id := genIDs(t, home, "file", "--seed", "3", "--level", "1")[0]
	w, err := world.NewStore(home).Get(id)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(w.Dir, "tests", "expected.txt")
	old, err := os.ReadFile(p)
	if err != nil || len(old) == 0 {
		t.Fatalf("the world's expected total: %v", err)
	}
	os.Chmod(p, 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY, 0) // in place: no new inode, no directory change
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{old[0] ^ 1})
	f.Close()
	os.Chmod(p, 0o444)
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
	 {"calls": [{"name": "claim_outputs", "args": {"paths": ["/outputs/total.txt"]}},
	            {"name": "bash", "args": {"command": "awk -F, 'NR>1 {s+=$3} END {printf \"%.2f\\n\", s}' /inputs/orders.csv > /outputs/total.txt"}}]},
	 {"calls": [{"name": "finish", "args": {"summary": "summed"}}]}]}`), 0o644)
	code, stdout, stderr := cli(t, "run", "--home", home, "--world", id, "--provider", "scripted", "--script", script, "--json", "--quiet")
	if code == 0 {
		t.Fatalf("run --world of a world rewritten in place succeeded\n%s\n%s", stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	if s.Trainable || s.Status == "completed" || !strings.Contains(strings.Join(s.Failures, "; "), "tests/expected.txt is not the file stored") {
		t.Errorf("the rollout's result counts: status %s, trainable %v, failures %q", s.Status, s.Trainable, s.Failures)
	}
	found := false
	for _, wn := range decodeAll[record.Warning](t, runtest.Events(t, onlyRun(t, home)), record.TypeWarning) {
		found = found || wn.Code == "world_changed" && strings.Contains(wn.Message, "tests/expected.txt")
	}
	if !found {
		t.Error("the record does not say the world was changed")
	}
}
