// Package verify runs a task's executable verification clauses (R-VERIFY-2:
// tests and recompute) against the terminal state of a finished run. (What
// agents claim is checked by package verify/claim.)
//
// Guarantees:
//   - every clause runs in a fresh sandbox of its own, with no network, with
//     a clean environment (PATH, HOME, LANG, TMPDIR and Python settings
//     that keep user site-packages and bytecode writes out; no PYTHONPATH
//     or other inherited variable); /inputs (the initial inputs),
//     /workspace and /outputs (the terminal state), /trace (the run's
//     record, when given) and, for the clause's files, /tests are all
//     mounted read-only; the working directory is /tests when the clause
//     has files, else a fresh /tmp;
//   - what the agent wrote reaches a verdict only as the state under check:
//     the command comes from the contract, /tests from the task's directory,
//     nothing runs from /workspace or /outputs unless the command says so,
//     neither is on Python's path unless the command puts it there, and
//     nothing a clause writes survives it; so a planted reward file, a
//     sitecustomize.py or unittest.py in /workspace, or a modified copy of a
//     test there changes nothing;
//   - the processes of a clause cannot reach into one another
//     (sandbox.Spec.NoTrace: ptrace, process_vm_readv/_writev and
//     pidfd_getfd fail, /proc is read-only), so code under test that its
//     runner starts in a process of its own cannot attach to the runner or
//     write its memory; unless the runner starts it through the sandbox's
//     confine tool (sandbox.ConfinePath -hide /tests -hide /report), which
//     only the runner can do, knowing which process is the code under test,
//     it can still read /tests and, unless the runner made itself
//     non-dumpable, the runner's memory (the README's threat model says
//     what a runner must do; generated code worlds do it);
//   - a tests clause with must_pass passes only if its report (JUnit XML
//     written under /report, pytest's or unittest's verbose output) shows
//     every listed test passed; an exit status of 0 alone never does, so a
//     deliverable that ends the test process early (os._exit(0)) fails. The
//     code under test still runs inside the test process and could forge a
//     report: see the README's threat model;
//   - a recompute reads the deliverable it compares on the host, as a
//     regular file inside the outputs directory only: a symlink fails; a
//     JUnit report is read the same way from the clause's own report
//     directory, which is created empty for the clause and removed after;
//   - Run never returns an error and never panics on a bad state: anything
//     that stops a clause from running is a failed Result saying why.
//
// A source_alignment clause runs no command and needs no sandbox: it reads
// its deliverables on the host, as regular files inside the outputs
// directory only, and checks their [E12] citations against Env.Evidence
// (align.go).
//
// Clause kinds are judged through the kinds table; a kind implemented in
// its own file adds itself there. Kinds not in it (rubric, human review)
// fail as unsupported.
package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/sandbox"
)

// DefaultTimeout bounds a clause when neither it nor Env sets a timeout.
const DefaultTimeout = 5 * time.Minute

const (
	// maxShown caps Result.Stdout and Result.Stderr.
	maxShown = 64 << 10
	// maxCompared caps what a recompute can compare: its stdout and the
	// deliverable.
	maxCompared = 1 << 20
)

// Env is where clauses run and what they see. The directories are host
// paths; an empty one is not mounted.
type Env struct {
	Runner    sandbox.Runner
	Inputs    string // the run's initial inputs, at /inputs
	Workspace string // the terminal workspace, at /workspace
	Outputs   string // the terminal outputs, at /outputs
	Trace     string // the run's record directory, at /trace
	// Timeout bounds each clause that sets none itself; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Evidence is the run's Q, which source_alignment checks citations
	// against; nil: every citation cites an unknown id.
	Evidence evidence.Texts
	// Scratch is the host directory where a clause's report directory is
	// made (and removed after it); "" means the system's temporary
	// directory.
	Scratch string
	// Judge is the model a rubric clause's judge calls (rubric.go); nil:
	// rubric clauses fail saying so.
	Judge llm.Model
	// Deliverables are the paths a rubric's judge reads (sees:
	// deliverables).
	Deliverables []string
}

// Result is the verdict of one clause.
type Result struct {
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	Kind       string `json:"kind"`
	Command    string `json:"command"`
	Passed     bool   `json:"passed"`
	Detail     string `json:"detail"`
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// MustPass is each must_pass id's status in the report (tests clauses
	// with must_pass only).
	MustPass []TestOutcome `json:"must_pass,omitempty"`
	// Scores are a rubric's scores and justifications; Pending marks a
	// human clause awaiting review.
	Scores  []Score `json:"scores,omitempty"`
	Pending bool    `json:"pending,omitempty"`
}

// Label names the clause the result belongs to, as contract.Clause.Label.
func (r Result) Label() string {
	return contract.Clause{Index: r.Index, Name: r.Name, Kind: r.Kind}.Label()
}

// RunAll runs the clauses one after another, in order.
func RunAll(ctx context.Context, env Env, clauses []contract.Clause) []Result {
	out := make([]Result, 0, len(clauses))
	for _, c := range clauses {
		out = append(out, Run(ctx, env, c))
	}
	return out
}

// kinds judges each supported clause kind, filling in r. A kind in a file
// of its own registers itself here from an init function.
var kinds = map[string]func(ctx context.Context, env Env, c contract.Clause, r *Result){
	contract.KindTests:     runCommand,
	contract.KindRecompute: runCommand,
	contract.KindRubric:    func(ctx context.Context, env Env, c contract.Clause, r *Result) { *r = rubric(ctx, env, c, *r) },
	contract.KindHuman: func(_ context.Context, _ Env, _ contract.Clause, r *Result) {
		r.Pending, r.Detail = true, "awaiting review: approve or reject with apodex review RUN --approve|--reject --note TEXT"
	},
}

// Run runs one clause and judges it.
func Run(ctx context.Context, env Env, c contract.Clause) Result {
	r := Result{Index: c.Index, Name: c.Name, Kind: c.Kind, Command: c.Command, ExitCode: -1}
	judge, ok := kinds[c.Kind]
	if !ok {
		r.Detail = fmt.Sprintf("clause kind %q is not supported by this verifier", c.Kind)
		return r
	}
	judge(ctx, env, c, &r)
	return r
}

// cleanEnv is the whole environment of a verifier command.
var cleanEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"PYTHONNOUSERSITE=1",        // no ~/.local site-packages (and its .pth files)
	"PYTHONDONTWRITEBYTECODE=1", // /tests is read-only anyway
}

// runCommand runs a tests or recompute clause's command and judges it.
func runCommand(ctx context.Context, env Env, c contract.Clause, r *Result) {
	switch {
	case env.Runner == nil:
		r.Detail = "no sandbox to run the verifier in"
		return
	case strings.TrimSpace(c.Command) == "":
		r.Detail = "the clause has no command"
		return
	case c.Kind == contract.KindRecompute && env.Outputs == "":
		r.Detail = "no outputs directory to compare with"
		return
	}
	ms := mounts(env, c)
	for _, m := range ms {
		if fi, err := os.Stat(m.Source); err != nil || !fi.IsDir() {
			r.Detail = fmt.Sprintf("%s cannot be mounted: %s is not a directory (any more)", m.Target, m.Source)
			return
		}
	}
	report := ""
	if strings.HasPrefix(c.Report, contract.ReportJUnit) {
		dir, done, err := reportDir(env.Scratch)
		if err != nil {
			r.Detail = fmt.Sprintf("cannot make the report directory: %v; check that the scratch directory is writable", err)
			return
		}
		defer done()
		report = dir
		ms = append(ms, sandbox.Mount{Source: dir, Target: contract.ReportDir, Writable: true})
	}
	dir := "/tmp"
	if c.Files != "" {
		dir = "/tests"
	}
	timeout := cmp.Or(c.Timeout, env.Timeout, DefaultTimeout)
	res, err := env.Runner.Run(ctx, sandbox.Spec{
		Command:     c.Command,
		Dir:         dir,
		Mounts:      ms,
		Timeout:     timeout,
		OutputLimit: maxCompared,
		Env:         cleanEnv,
		// The code under test may run in a process of its own: it must
		// not reach into the test runner's (ptrace, /proc/PID/mem).
		NoTrace: true,
	})
	r.ExitCode, r.DurationMS = res.ExitCode, res.Duration.Milliseconds()
	r.Stdout, r.Stderr = shown(res.Stdout), shown(res.Stderr)
	switch {
	case errors.Is(err, context.Canceled):
		r.ExitCode, r.Detail = -1, "cancelled before the verifier finished"
		return
	case err != nil:
		r.ExitCode, r.Detail = -1, fmt.Sprintf("the verifier could not run: %v", err)
		return
	case res.TimedOut:
		r.Detail = fmt.Sprintf("timed out after %s; raise the clause's timeout or make the check faster", timeout)
		return
	case res.ExitCode == 127:
		r.Detail = "exit 127: the command, or a program or script it runs, was not found: " + lastLine(res.Stderr, res.Stdout)
		return
	case res.ExitCode == 126:
		r.Detail = "exit 126: the command was found but cannot be executed: " + lastLine(res.Stderr, res.Stdout)
		return
	case res.ExitCode > 128:
		r.Detail = fmt.Sprintf("killed by signal %d", res.ExitCode-128)
		return
	}
	if c.Kind == contract.KindTests && len(c.MustPass) > 0 {
		results, err := reported(c, report, res.Stdout, res.Stderr)
		if err != nil {
			r.Detail = fmt.Sprintf("tests not confirmed (exit %d): the %s report: %v", res.ExitCode, c.Report, err)
			return
		}
		var why string
		r.Passed, why, r.MustPass = judgeReport(c.MustPass, results)
		r.Detail = fmt.Sprintf("%s (exit %d, report %s)", why, res.ExitCode, c.Report)
		return
	}
	if c.Kind == contract.KindTests {
		r.Passed = res.ExitCode == 0
		if r.Passed {
			r.Detail = "tests passed (exit 0)"
		} else {
			r.Detail = fmt.Sprintf("tests failed (exit %d): %s", res.ExitCode, lastLine(res.Stderr, res.Stdout))
		}
		return
	}
	if res.ExitCode != 0 {
		r.Detail = fmt.Sprintf("the recompute command failed (exit %d): %s", res.ExitCode, lastLine(res.Stderr, res.Stdout))
		return
	}
	if res.StdoutBytes > int64(len(res.Stdout)) {
		r.Detail = fmt.Sprintf("the recompute command printed %d bytes, more than the %d that can be compared", res.StdoutBytes, maxCompared)
		return
	}
	r.Passed, r.Detail = compare(env.Outputs, c, string(res.Stdout))
}

func mounts(env Env, c contract.Clause) []sandbox.Mount {
	var ms []sandbox.Mount
	for _, m := range []sandbox.Mount{
		{Source: env.Inputs, Target: "/inputs"},
		{Source: env.Workspace, Target: "/workspace"},
		{Source: env.Outputs, Target: "/outputs"},
		{Source: env.Trace, Target: "/trace"},
		{Source: c.Files, Target: "/tests"},
	} {
		if m.Source != "" {
			ms = append(ms, m) // Writable is false: every mount is read-only
		}
	}
	return ms
}

// compare judges a recompute: the trimmed stdout (the expected value)
// against the trimmed deliverable (what the agent delivered).
//
// With a tolerance t both are parsed as float64 and pass when
// |a-b| <= t * max(1, |a|, |b|): t is absolute for values up to 1 in
// magnitude and relative above (Python's math.isclose with rel_tol =
// abs_tol = t), so 1e-9 absorbs float rounding at any scale.
func compare(outputs string, c contract.Clause, stdout string) (bool, string) {
	raw, err := readDeliverable(outputs, c.Compare)
	if err != nil {
		return false, fmt.Sprintf("%s: %v", c.Compare, err)
	}
	want, got := strings.TrimSpace(stdout), strings.TrimSpace(raw)
	if c.Tolerance == nil {
		if want == got {
			return true, fmt.Sprintf("%s equals the recomputed value %s", c.Compare, quote(want))
		}
		return false, fmt.Sprintf("%s holds %s but the recompute printed %s", c.Compare, quote(got), quote(want))
	}
	a, errA := strconv.ParseFloat(want, 64)
	if errA != nil {
		return false, fmt.Sprintf("the recompute printed %s, which is not a number", quote(want))
	}
	b, errB := strconv.ParseFloat(got, 64)
	if errB != nil {
		return false, fmt.Sprintf("%s holds %s, which is not a number", c.Compare, quote(got))
	}
	t := *c.Tolerance
	if isClose(a, b, t) {
		return true, fmt.Sprintf("%s holds %s, within %g of the recomputed %s", c.Compare, quote(got), t, quote(want))
	}
	return false, fmt.Sprintf("%s holds %s but the recompute printed %s (difference %g, tolerance %g)", c.Compare, quote(got), quote(want), math.Abs(a-b), t)
}

func isClose(a, b, tol float64) bool {
	if a == b {
		return true
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	return math.Abs(a-b) <= tol*max(1, math.Abs(a), math.Abs(b))
}

// readDeliverable reads a regular file under outputs, never following a
// symlink or a path out of it.
func readDeliverable(outputs, plane string) (string, error) {
	rel, ok := strings.CutPrefix(plane, "/outputs/")
	if !ok {
		return "", errors.New("not under /outputs")
	}
	root, err := os.OpenRoot(outputs)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", errors.New("missing, so there is nothing to compare")
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("is not a regular file (%s)", fi.Mode().Type())
	case fi.Size() > maxCompared:
		return "", fmt.Errorf("is %d bytes, more than the %d that can be compared", fi.Size(), maxCompared)
	}
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCompared))
	return string(b), err
}

func shown(b []byte) string {
	if len(b) > maxShown {
		b = b[:maxShown]
	}
	return string(b)
}

// lastLine is the last non-blank line of the first output that has one:
// usually the error message.
func lastLine(outs ...[]byte) string {
	for _, o := range outs {
		lines := strings.Split(strings.TrimSpace(string(o)), "\n")
		if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
			return clip(l)
		}
	}
	return "no output"
}

func quote(s string) string { return strconv.Quote(clip(s)) }

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
