package main

// The publication plane and task contracts, checked from outside as issue 3
// says: scripted endpoints write /outputs without the lease (file tool and
// shell), claim a manifest, write undeclared files and links, use scratch,
// deliver an empty or a good report, and run under task files whose clauses
// pass or fail; then the exit code, `run --json`, the record, `show
// --artifacts` and the outputs directory are inspected.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/state"
	"github.com/apodex/apodex/internal/verify"
)

const peCSV = "region,value\nnorth,1\nsouth,5\n" // the value column sums to 6

// peInputs is an inputs directory holding data.csv.
func peInputs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	peWrite(t, filepath.Join(dir, "data.csv"), peCSV)
	return dir
}

func peWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// peRun runs the CLI with --json and wants exit code want.
func peRun(t *testing.T, want int, args ...string) run.Summary {
	t.Helper()
	code, out, errOut := cli(t, append(args, "--quiet", "--json")...)
	noCrashText(t, out, errOut)
	if code != want {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	s := decodeSummary(t, out)
	noInvalidHistory(t, s.RunDir)
	return s
}

// noInvalidHistory fails the test when an agent of the run sent a history
// that was not a valid conversation (the clients repaired it, hiding a
// runtime bug behind the repair).
func noInvalidHistory(t *testing.T, dir string) {
	t.Helper()
	if dir == "" {
		return
	}
	for _, w := range decodeAll[record.Warning](t, runtest.Events(t, dir), record.TypeWarning) {
		if w.Code == record.WarnInvalidHistory {
			t.Errorf("the runtime broke an agent's history: %s", w.Message)
		}
	}
}

// peSHA is the hash of a host file as the delivery states it.
func peSHA(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(fileContent(t, path)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// peObs is the observation of call i of turn n: what the model read in the
// request after it.
func peObs(t *testing.T, reqs []llmtest.Request, n, i int) string {
	t.Helper()
	if n+1 >= len(reqs) {
		t.Fatalf("no request after turn %d (%d requests)", n, len(reqs))
	}
	obs := toolReplies(reqs[n+1])
	if i >= len(obs) {
		t.Fatalf("turn %d has %d observations, want call %d", n, len(obs), i)
	}
	return obs[i].Content
}

// peContains wants every part in s.
func peContains(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s does not mention %q:\n%s", what, p, s)
		}
	}
}

// peTree lists what is under dir (relative, slash-separated, with "@" after
// a symbolic link and "/" after a directory).
func peTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			rel += "@"
		case d.IsDir():
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// peLeases are the run's lease events as "action agent holder".
func peLeases(t *testing.T, evs []record.Event) ([]string, []publish.LeaseEvent) {
	t.Helper()
	var short []string
	var out []publish.LeaseEvent
	for _, e := range evs {
		if e.Type != record.TypeLease {
			continue
		}
		var l publish.LeaseEvent
		if err := e.Decode(&l); err != nil {
			t.Fatal(err)
		}
		if l.Agent != e.Agent {
			t.Errorf("lease event seq %d: agent %q in the payload, %q on the event", e.Seq, l.Agent, e.Agent)
		}
		out = append(out, l)
		short = append(short, l.Action+" "+l.Agent+" "+l.Holder)
	}
	return short, out
}

// peOnlyDelivery is the run's single delivery event.
func peOnlyDelivery(t *testing.T, evs []record.Event) publish.Delivery {
	t.Helper()
	ds := decodeAll[publish.Delivery](t, evs, record.TypeDelivery)
	if len(ds) != 1 {
		t.Fatalf("%d delivery events, want 1", len(ds))
	}
	return ds[0]
}

// peArtifacts is `show --artifacts --json`.
type peArtifacts struct {
	Artifacts []struct {
		state.Artifact
		Provenance []state.Chain `json:"provenance"`
		Line       string        `json:"line"`
	} `json:"artifacts"`
	Control state.Control `json:"control"`
	Missing []string      `json:"missing"`
}

// peProvenance checks that show --artifacts, as text and as JSON, traces
// artifact back through a bash call to the input from.
func peProvenance(t *testing.T, home, id, artifact, from string) {
	t.Helper()
	code, out, errOut := cli(t, "show", "--artifacts", "--home", home, id)
	if code != 0 {
		t.Fatalf("show --artifacts: exit %d\n%s%s", code, out, errOut)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, artifact+" ← ") {
			line = l
		}
	}
	if !strings.Contains(line, " ← bash#") || !strings.HasSuffix(strings.TrimSpace(line), "← "+from) {
		t.Errorf("show --artifacts has no chain %s ← bash#N ← %s:\n%s", artifact, from, out)
	}
	code, out, errOut = cli(t, "show", "--artifacts", "--json", "--home", home, id)
	var v peArtifacts
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("show --artifacts --json: exit %d\n%s%s", code, out, errOut)
	}
	for _, a := range v.Artifacts {
		if a.Path != artifact {
			continue
		}
		if len(a.Provenance) == 0 {
			t.Fatalf("%s has no provenance", artifact)
		}
		hops := a.Provenance[0].Hops
		last := hops[len(hops)-1]
		if hops[0].Label != artifact || last.Kind != state.KindFile || last.Label != from || !strings.HasPrefix(hops[1].Label, "bash#") {
			t.Errorf("%s: chain %+v, want it to go through a bash call to the input %s", artifact, hops, from)
		}
		return
	}
	t.Errorf("show --artifacts --json lists no %s: %s", artifact, out)
}

// An agent writes /outputs without the lease, claims a manifest, writes an
// undeclared file, links at its declared path (to /etc/passwd, to an input,
// a hard link), then writes its report from the input: only the report is
// delivered, and no link ever reaches the outputs directory.
func TestPublishLeaseManifestAndLinks(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), peInputs(t)
	passwd := fileContent(t, "/etc/passwd")
	claim := func(paths ...string) llmtest.Turn {
		return calls(call("claim_outputs", map[string]any{"paths": paths}))
	}
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		// 0: no lease yet.
		calls(call("write_file", map[string]any{"path": "/outputs/x", "content": "x"}), bash("echo x > /outputs/x")),
		// 1: a claim that is refused.
		claim("/outputs/scratch/notes.txt"),
		// 2: the manifest.
		claim("/outputs/report.md"),
		// 3: an undeclared file, by file tool and shell.
		calls(call("write_file", map[string]any{"path": "/outputs/other.txt", "content": "other"}), bash("echo other > /outputs/other.txt")),
		// 4-6: links at the declared path.
		calls(bash("ln -s /etc/passwd /outputs/report.md && ls -l /outputs/report.md")),
		calls(bash("ln -sf /inputs/data.csv /outputs/report.md && cat /outputs/report.md")),
		calls(bash("printf 'linked\\n' > /outputs/report.md && ln /outputs/report.md /outputs/alias.md")),
		// 7: the report, computed from the input.
		calls(bash(`awk -F, 'NR>1{s+=$2} END{print "# Report\nThe sum is " s "."}' /inputs/data.csv > /outputs/report.md`)),
		calls(finish("report delivered")),
	))
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "deliver a report")...)
	reqs := srv.Requests()
	if len(reqs) != 9 {
		t.Fatalf("%d requests, want 9", len(reqs))
	}
	runDir := s.RunDir
	outputs := filepath.Join(runDir, "outputs")

	t.Run("without the lease", func(t *testing.T) {
		o := peObs(t, reqs, 0, 0)
		if !strings.HasPrefix(o, "error:") {
			t.Errorf("write_file without the lease was not refused: %q", o)
		}
		peContains(t, "the refused write_file", o, "/outputs/x", "claim_outputs")
		o = peObs(t, reqs, 0, 1)
		if exitCode(o) == 0 {
			t.Errorf("bash write without the lease succeeded: %q", o)
		}
		peContains(t, "the failed bash write", o, "Read-only file system", "claim_outputs")
		mustNotExist(t, filepath.Join(outputs, "x"))
	})

	t.Run("claims", func(t *testing.T) {
		if o := peObs(t, reqs, 1, 0); !strings.HasPrefix(o, "error:") || !strings.Contains(o, "/outputs/scratch") {
			t.Errorf("claiming a scratch path: %q", o)
		}
		peContains(t, "the grant", peObs(t, reqs, 2, 0), "you hold the publishing lease", "/outputs/report.md")
	})

	t.Run("undeclared", func(t *testing.T) {
		o := peObs(t, reqs, 3, 0)
		if !strings.HasPrefix(o, "error:") {
			t.Errorf("undeclared write_file was not refused: %q", o)
		}
		peContains(t, "the refused undeclared write_file", o, "/outputs/other.txt", "not in your manifest", "/outputs/report.md")
		peContains(t, "the undeclared bash write", peObs(t, reqs, 3, 1), "not delivered: /outputs/other.txt", "not in the manifest [/outputs/report.md]")
		mustNotExist(t, filepath.Join(outputs, "other.txt"))
	})

	t.Run("links", func(t *testing.T) {
		peContains(t, "the symlink to /etc/passwd", peObs(t, reqs, 4, 0), "refused /outputs/report.md", "symbolic link (to /etc/passwd)")
		peContains(t, "the symlink to an input", peObs(t, reqs, 5, 0), "refused /outputs/report.md", "symbolic link (to /inputs/data.csv)")
		o := peObs(t, reqs, 6, 0)
		peContains(t, "the hard link", o, "refused /outputs/report.md", "2 hard links")
		peContains(t, "the hard link's undeclared name", o, "/outputs/alias.md")
		if got := fileContent(t, "/etc/passwd"); got != passwd {
			t.Errorf("/etc/passwd changed")
		}
		if got := fileContent(t, filepath.Join(runDir, "inputs", "data.csv")); got != peCSV {
			t.Errorf("the run's input changed to %q", got)
		}
	})

	t.Run("outputs on disk", func(t *testing.T) {
		if got, want := peTree(t, outputs), []string{"report.md", "scratch/"}; !slices.Equal(got, want) {
			t.Errorf("outputs hold %v, want %v", got, want)
		}
		if got := fileContent(t, filepath.Join(outputs, "report.md")); got != "# Report\nThe sum is 6.\n" {
			t.Errorf("report.md = %q", got)
		}
		if left := peTree(t, filepath.Join(runDir, "staging")); len(left) > 0 {
			t.Errorf("staging copies left behind: %v", left)
		}
	})

	t.Run("summary", func(t *testing.T) {
		if s.Status != "completed" || s.Termination != "completed" || len(s.Failures) > 0 {
			t.Errorf("status %q termination %q failures %v", s.Status, s.Termination, s.Failures)
		}
		d := s.Delivery
		if d == nil || !d.OK || len(d.Entries) != 1 || len(d.Undeclared) > 0 {
			t.Fatalf("delivery %+v", d)
		}
		e := d.Entries[0]
		report := filepath.Join(outputs, "report.md")
		if e.Path != "/outputs/report.md" || e.Status != "delivered" || e.Reason != "" || e.Agent != "main" ||
			e.Baseline != publish.Absent || e.SHA256 != peSHA(t, report) || e.Bytes != int64(len(fileContent(t, report))) {
			t.Errorf("delivery entry %+v", e)
		}
	})

	t.Run("record", func(t *testing.T) {
		evs := runtest.Events(t, runDir)
		short, leases := peLeases(t, evs)
		if want := []string{"refused main ", "granted main main", "released main main"}; !slices.Equal(short, want) {
			t.Fatalf("lease events %q, want %q", short, want)
		}
		if !strings.Contains(leases[0].Reason, "/outputs/scratch") || !slices.Equal(leases[0].Paths, []string{"/outputs/scratch/notes.txt"}) {
			t.Errorf("refused: %+v", leases[0])
		}
		if !slices.Equal(leases[1].Paths, []string{"/outputs/report.md"}) || leases[1].Baselines["/outputs/report.md"] != publish.Absent {
			t.Errorf("granted: %+v", leases[1])
		}
		if leases[2].Reason != "completed" || !slices.Equal(leases[2].Paths, []string{"/outputs/report.md"}) {
			t.Errorf("released: %+v", leases[2])
		}
		d := peOnlyDelivery(t, evs)
		if !d.OK || len(d.Entries) != 1 || d.Entries[0] != s.Delivery.Entries[0] {
			t.Errorf("delivery event %+v, the summary says %+v", d, *s.Delivery)
		}
		rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
		if len(rf) != 1 || rf[0].Status != "completed" {
			t.Errorf("run_finished %+v", rf)
		}
	})

	t.Run("show", func(t *testing.T) {
		code, out, _ := cli(t, "show", "--home", home, s.RunID)
		if code != 0 {
			t.Fatalf("show: exit %d", code)
		}
		peContains(t, "show", out, "delivery:    ok", "delivered  /outputs/report.md")
		peProvenance(t, home, s.RunID, "/outputs/report.md", "/inputs/data.csv")
	})
}

// /outputs/scratch is writable by the agent with or without the lease, by
// file tool and shell, within --scratch-quota; past it writes are refused
// with a clear error; scratch is never delivered nor reported.
func TestPublishScratch(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		// 0: scratch without the lease.
		calls(call("write_file", map[string]any{"path": "/outputs/scratch/notes.txt", "content": "notes\n"}),
			bash("mkdir -p /outputs/scratch/d && echo by-bash > /outputs/scratch/d/b.txt && echo wrote")),
		// 1: one file-tool write bigger than the quota, refused up front.
		calls(call("write_file", map[string]any{"path": "/outputs/scratch/big.txt", "content": strings.Repeat("b", 5000)})),
		// 2: a flood from the shell goes past the quota.
		calls(bash("head -c 10000 /dev/zero > /outputs/scratch/flood.bin; echo flooded")),
		// 3: after it, scratch writes are refused until files go.
		calls(call("write_file", map[string]any{"path": "/outputs/scratch/more.txt", "content": "more"})),
		calls(bash("rm /outputs/scratch/flood.bin")),
		calls(call("write_file", map[string]any{"path": "/outputs/scratch/more.txt", "content": "more"})),
		// 6: the lease holder still writes scratch for real.
		calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}})),
		calls(bash("echo held > /outputs/scratch/holder.txt && cat /outputs/scratch/notes.txt > /outputs/report.md")),
		calls(finish("done")),
	))
	s := peRun(t, 0, append(openaiArgs(home, srv), "--scratch-quota", "4096B", "use scratch")...)
	reqs := srv.Requests()
	if len(reqs) != 9 {
		t.Fatalf("%d requests, want 9", len(reqs))
	}
	scratch := filepath.Join(s.RunDir, "outputs", "scratch")

	if o := peObs(t, reqs, 0, 0); strings.HasPrefix(o, "error:") {
		t.Errorf("write_file to scratch without the lease: %q", o)
	}
	if o := peObs(t, reqs, 0, 1); exitCode(o) != 0 || !strings.Contains(o, "wrote") {
		t.Errorf("bash to scratch without the lease: %q", o)
	}
	if o := peObs(t, reqs, 1, 0); !strings.HasPrefix(o, "error:") || !strings.Contains(o, "quota") || !strings.Contains(o, "4096") {
		t.Errorf("a write bigger than the quota: %q", o)
	}
	mustNotExist(t, filepath.Join(scratch, "big.txt"))
	peContains(t, "the flood's observation", peObs(t, reqs, 2, 0), "scratch quota exceeded", "of 4096 bytes used")
	if o := peObs(t, reqs, 3, 0); !strings.HasPrefix(o, "error:") || !strings.Contains(o, "scratch quota exceeded") || !strings.Contains(o, "delete files") {
		t.Errorf("a write while over the quota: %q", o)
	}
	if o := peObs(t, reqs, 5, 0); strings.HasPrefix(o, "error:") {
		t.Errorf("a write once the flood was deleted: %q", o)
	}
	if o := peObs(t, reqs, 7, 0); exitCode(o) != 0 || !strings.Contains(o, "kept /outputs/report.md") {
		t.Errorf("the holder's command: %q", o)
	}

	want := map[string]string{"notes.txt": "notes\n", "d/b.txt": "by-bash\n", "more.txt": "more", "holder.txt": "held\n"}
	for name, content := range want {
		if got := fileContent(t, filepath.Join(scratch, name)); got != content {
			t.Errorf("scratch/%s = %q, want %q", name, got, content)
		}
	}
	mustNotExist(t, filepath.Join(scratch, "flood.bin"))

	d := s.Delivery
	if d == nil || !d.OK || len(d.Entries) != 1 || d.Entries[0].Path != "/outputs/report.md" || len(d.Undeclared) != 0 {
		t.Fatalf("delivery %+v: want report.md alone, scratch neither delivered nor reported", d)
	}
	dev := peOnlyDelivery(t, runtest.Events(t, s.RunDir))
	for _, e := range dev.Entries {
		if strings.HasPrefix(e.Path, "/outputs/scratch") {
			t.Errorf("the delivery event lists %s", e.Path)
		}
	}
	if len(dev.Undeclared) > 0 {
		t.Errorf("the delivery event reports %v", dev.Undeclared)
	}
}

// A declared report that is empty fails delivery (exit 1, gate_failed); a
// good one is delivered (exit 0).
func TestPublishEmptyOrGoodReport(t *testing.T) {
	tests := []struct {
		name, content string
		code          int
		status, term  string
		entry         string // status of the entry
		reason        string
	}{
		{"empty", "", 1, "failed", "gate_failed", "failed", "empty"},
		{"good", "# Report\nAll good.\n", 0, "completed", "completed", "delivered", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			srv := llmtest.NewOpenAI(t, llmtest.Script(
				calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}})),
				calls(call("write_file", map[string]any{"path": "/outputs/report.md", "content": tt.content})),
				calls(finish("wrote the report")),
			))
			s := peRun(t, tt.code, append(openaiArgs(home, srv), "write the report")...)
			if s.Status != tt.status || s.Termination != tt.term {
				t.Errorf("status %q termination %q, want %q %q", s.Status, s.Termination, tt.status, tt.term)
			}
			report := filepath.Join(s.RunDir, "outputs", "report.md")
			if got := fileContent(t, report); got != tt.content {
				t.Errorf("report.md on disk = %q", got)
			}
			if s.Delivery == nil || len(s.Delivery.Entries) != 1 {
				t.Fatalf("delivery %+v", s.Delivery)
			}
			e := s.Delivery.Entries[0]
			if e.Path != "/outputs/report.md" || e.Status != tt.entry || e.Reason != tt.reason || e.SHA256 != peSHA(t, report) || s.Delivery.OK != (tt.code == 0) {
				t.Errorf("delivery %+v", *s.Delivery)
			}
			failed := slices.ContainsFunc(s.Failures, func(f string) bool {
				return strings.Contains(f, "/outputs/report.md") && strings.Contains(f, "empty")
			})
			if failed != (tt.code != 0) || (tt.code == 0 && len(s.Failures) > 0) {
				t.Errorf("failures %q", s.Failures)
			}
			evs := runtest.Events(t, s.RunDir)
			if d := peOnlyDelivery(t, evs); d.Entries[0] != e {
				t.Errorf("delivery event %+v, summary entry %+v", d.Entries[0], e)
			}
			rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
			if len(rf) != 1 || rf[0].Status != tt.status || rf[0].Termination != tt.term || !slices.Equal(rf[0].Failures, s.Failures) {
				t.Errorf("run_finished %+v", rf)
			}
			code, out, _ := cli(t, "show", "--home", home, s.RunID)
			if code != 0 || !strings.Contains(out, "termination: "+tt.term) || !strings.Contains(out, tt.entry) {
				t.Errorf("show: exit %d\n%s", code, out)
			}
		})
	}
}

// peTask writes a task file (and its inputs and tests) into a new
// directory and returns its path.
func peTask(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	peWrite(t, filepath.Join(dir, "data", "data.csv"), peCSV)
	peWrite(t, filepath.Join(dir, "tests", "check.sh"),
		"grep -q 'sum is 6' /outputs/report.md || { echo 'the report does not state the sum 6' >&2; exit 1; }\n")
	// Kept private, as a user may: the verifier's sandbox uid still reads
	// the run's copy.
	if err := os.Chmod(filepath.Join(dir, "tests", "check.sh"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "tests"), 0o700); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(dir, "task.yaml")
	peWrite(t, task, `objective: Sum the value column of /inputs/data.csv and explain it
inputs: ./data
budget: {turns: 10, tool_calls: 20}
deliverables:
  - path: /outputs/sum.txt
    non_empty: true
  - path: /outputs/report.md
    non_empty: true
    ext: [.md]
verify:
  - kind: tests
    name: report states the sum
    command: sh /tests/check.sh
    files: ./tests
  - kind: recompute
    name: sum recomputed
    command: awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv
    compare: /outputs/sum.txt
`)
	return task
}

// peVerifyRun is `apodex verify --json RUN`.
func peVerifyRun(t *testing.T, home, id string, want int) run.Reverification {
	t.Helper()
	code, out, errOut := cli(t, "verify", "--json", "--home", home, id)
	var rv run.Reverification
	if code != want || json.Unmarshal([]byte(out), &rv) != nil {
		t.Fatalf("verify: exit %d, want %d\n%s%s", code, want, out, errOut)
	}
	return rv
}

// peVerdicts are "label passed" for each clause result.
func peVerdicts(rs []verify.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Label()+" "+passWord(r.Passed))
	}
	return out
}

// A task file's clauses decide the run: completed only when every clause
// passes; a failing clause is named; `apodex verify` reruns them. A planted
// passing test and reward file in the workspace change nothing.
func TestTaskContractClauses(t *testing.T) {
	runtest.NeedSandbox(t)
	task := peTask(t)
	const testsLabel, recomputeLabel = `verify[0] "report states the sum" (tests)`, `verify[1] "sum recomputed" (recompute)`
	tests := []struct {
		name        string
		sum, report string
		code        int
		verdicts    []string
		failing     string // the clause named in the failures
	}{
		{"every clause passes", "6", "The sum is 6.\n", 0, []string{testsLabel + " passed", recomputeLabel + " passed"}, ""},
		{"the tests clause fails", "6", "The sum is 7.\n", 1, []string{testsLabel + " FAILED", recomputeLabel + " passed"}, testsLabel},
		{"the recompute clause fails", "7", "The sum is 6.\n", 1, []string{testsLabel + " passed", recomputeLabel + " FAILED"}, recomputeLabel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			srv := llmtest.NewOpenAI(t, llmtest.Script(
				calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/sum.txt", "/outputs/report.md"}})),
				calls(bash("echo "+tt.sum+" > /outputs/sum.txt"),
					call("write_file", map[string]any{"path": "/outputs/report.md", "content": tt.report}),
					// Planted: neither is what the verifier runs or reads.
					call("write_file", map[string]any{"path": "/workspace/tests/check.sh", "content": "exit 0\n"}),
					call("write_file", map[string]any{"path": "/workspace/reward", "content": "1\n"})),
				calls(finish("delivered")),
			))
			s := peRun(t, tt.code, append(openaiArgs(home, srv), "--task", task)...)
			if m := srv.Requests()[0].Messages; len(m) < 2 || !strings.Contains(m[1].Content, "/outputs/sum.txt") || !strings.Contains(m[1].Content, "Sum the value column") {
				t.Errorf("the task message does not state the objective and the deliverables: %+v", m)
			}
			if strings.Contains(string(srv.Requests()[0].Raw), "sum is 6") {
				t.Errorf("the agent was shown the verifier's test")
			}
			if got := peVerdicts(s.Verify); !slices.Equal(got, tt.verdicts) {
				t.Errorf("verification %q, want %q", got, tt.verdicts)
			}
			if s.Delivery == nil || !s.Delivery.OK || len(s.Delivery.Entries) != 2 {
				t.Errorf("delivery %+v", s.Delivery)
			}
			for _, c := range s.Checks {
				if !c.OK {
					t.Errorf("deliverable check %+v failed", c)
				}
			}
			if tt.code == 0 {
				if s.Status != "completed" || s.Termination != "completed" || len(s.Failures) > 0 {
					t.Errorf("status %q termination %q failures %q", s.Status, s.Termination, s.Failures)
				}
			} else {
				if s.Status != "failed" || s.Termination != "gate_failed" || len(s.Failures) != 1 || !strings.Contains(s.Failures[0], tt.failing) {
					t.Errorf("status %q termination %q failures %q: want gate_failed naming %s only", s.Status, s.Termination, s.Failures, tt.failing)
				}
			}

			evs := runtest.Events(t, s.RunDir)
			var clauses []verify.Result
			for _, e := range evs {
				var r verify.Result
				if e.Type == record.TypeVerification && e.Decode(&r) == nil && r.Kind != "" {
					clauses = append(clauses, r)
				}
			}
			if got := peVerdicts(clauses); !slices.Equal(got, tt.verdicts) {
				t.Errorf("verification events %q, want %q", got, tt.verdicts)
			}
			ct := decodeAll[struct{ U0, Objective, File string }](t, evs, record.TypeContract)
			if len(ct) != 1 || ct[0].File != task || ct[0].U0 != "" || !strings.HasPrefix(ct[0].Objective, "Sum the value column") {
				t.Errorf("contract events %+v", ct)
			}

			rv := peVerifyRun(t, home, s.RunID, tt.code)
			if rv.Passed != (tt.code == 0) || !slices.Equal(peVerdicts(rv.Verify), tt.verdicts) || rv.Warning != "" {
				t.Errorf("verify: %+v", rv)
			}
			code, out, _ := cli(t, "verify", "--home", home, s.RunID)
			if code != tt.code || !strings.Contains(out, testsLabel) || !strings.Contains(out, recomputeLabel) {
				t.Errorf("verify (text): exit %d\n%s", code, out)
			}
		})
	}
}

// A task file with an unknown key or a deliverable outside /outputs is
// refused before the run starts: exit 2, the file and line, no run, no
// model call.
func TestTaskContractRefused(t *testing.T) {
	srv := llmtest.NewOpenAI(t, func(n int, _ llmtest.Request) llmtest.Turn {
		t.Errorf("the model was called (request %d) although the task file is bad", n)
		return llmtest.Turn{}
	})
	tests := []struct {
		name, yaml string
		line       string // file:line
		hints      []string
	}{
		{"unknown key", "objective: Write a report\ndeliverables:\n  - path: /outputs/report.md\n    colour: red\n", ":4:", []string{"colour"}},
		{"deliverable outside /outputs", "objective: Write a report\ndeliverables:\n  - path: /outputs/report.md\n  - path: /etc/passwd\n", ":4:", []string{"/etc/passwd", "/outputs"}},
		{"deliverable escaping /outputs", "objective: Write a report\ndeliverables:\n  - path: /outputs/../etc/passwd\n", ":3:", []string{".."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, task := t.TempDir(), filepath.Join(t.TempDir(), "task.yaml")
			peWrite(t, task, tt.yaml)
			code, out, errOut := cli(t, append(openaiArgs(home, srv), "--task", task)...)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s%s", code, out, errOut)
			}
			noCrashText(t, out, errOut)
			peContains(t, "stderr", errOut, append([]string{task + tt.line}, tt.hints...)...)
			if _, err := os.Stat(filepath.Join(home, "runs")); err == nil {
				t.Errorf("a run directory was created")
			}
		})
	}
}
