// Package verify runs a task's executable verification clauses (R-VERIFY-2:
// tests and recompute) against the terminal state of a finished run.
//
// Guarantees:
//   - every clause runs in a fresh sandbox of its own, with no network, in a
//     fresh /tmp as its working directory, with the runner's minimal
//     environment; /inputs (the initial inputs), /workspace and /outputs (the
//     terminal state), /trace (the run's record, when given) and, for the
//     clause's files, /tests are all mounted read-only;
//   - what the agent wrote reaches a verdict only as the state under check:
//     the command comes from the contract, /tests from the task's directory,
//     nothing runs from /workspace or /outputs unless the command says so,
//     and nothing a clause writes survives it; so a planted reward file or a
//     modified copy of a test in /workspace changes nothing;
//   - a recompute reads the deliverable it compares on the host, as a
//     regular file inside the outputs directory only: a symlink fails;
//   - Run never returns an error and never panics on a bad state: anything
//     that stops a clause from running is a failed Result saying why.
//
// A source_alignment clause runs no command and needs no sandbox: it reads
// its deliverables on the host, as regular files inside the outputs
// directory only, and checks their [E12] citations against Env.Evidence
// (align.go). Clauses of other kinds (rubric, human review) are not
// implemented yet; Run fails them as unsupported.
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

// Run runs one clause and judges it.
func Run(ctx context.Context, env Env, c contract.Clause) Result {
	r := Result{Index: c.Index, Name: c.Name, Kind: c.Kind, Command: c.Command, ExitCode: -1}
	switch {
	case c.Kind == contract.KindSourceAlignment:
		return align(env, c, r)
	case c.Kind == contract.KindRubric:
		return rubric(ctx, env, c, r)
	case c.Kind == contract.KindHuman:
		r.Pending, r.Detail = true, "awaiting review: approve or reject with apodex review RUN --approve|--reject --note TEXT"
		return r
	case c.Kind != contract.KindTests && c.Kind != contract.KindRecompute:
		r.Detail = fmt.Sprintf("clause kind %q is not supported by this verifier", c.Kind)
		return r
	case env.Runner == nil:
		r.Detail = "no sandbox to run the verifier in"
		return r
	case strings.TrimSpace(c.Command) == "":
		r.Detail = "the clause has no command"
		return r
	case c.Kind == contract.KindRecompute && env.Outputs == "":
		r.Detail = "no outputs directory to compare with"
		return r
	}
	ms := mounts(env, c)
	for _, m := range ms {
		if fi, err := os.Stat(m.Source); err != nil || !fi.IsDir() {
			r.Detail = fmt.Sprintf("%s cannot be mounted: %s is not a directory (any more)", m.Target, m.Source)
			return r
		}
	}
	timeout := cmp.Or(c.Timeout, env.Timeout, DefaultTimeout)
	res, err := env.Runner.Run(ctx, sandbox.Spec{
		Command:     c.Command,
		Dir:         "/tmp",
		Mounts:      ms,
		Timeout:     timeout,
		OutputLimit: maxCompared,
	})
	r.ExitCode, r.DurationMS = res.ExitCode, res.Duration.Milliseconds()
	r.Stdout, r.Stderr = shown(res.Stdout), shown(res.Stderr)
	switch {
	case errors.Is(err, context.Canceled):
		r.ExitCode, r.Detail = -1, "cancelled before the verifier finished"
		return r
	case err != nil:
		r.ExitCode, r.Detail = -1, fmt.Sprintf("the verifier could not run: %v", err)
		return r
	case res.TimedOut:
		r.Detail = fmt.Sprintf("timed out after %s; raise the clause's timeout or make the check faster", timeout)
		return r
	case res.ExitCode == 127:
		r.Detail = "exit 127: the command, or a program or script it runs, was not found: " + lastLine(res.Stderr, res.Stdout)
		return r
	case res.ExitCode == 126:
		r.Detail = "exit 126: the command was found but cannot be executed: " + lastLine(res.Stderr, res.Stdout)
		return r
	case res.ExitCode > 128:
		r.Detail = fmt.Sprintf("killed by signal %d", res.ExitCode-128)
		return r
	}
	if c.Kind == contract.KindTests {
		r.Passed = res.ExitCode == 0
		if r.Passed {
			r.Detail = "tests passed (exit 0)"
		} else {
			r.Detail = fmt.Sprintf("tests failed (exit %d): %s", res.ExitCode, lastLine(res.Stderr, res.Stdout))
		}
		return r
	}
	if res.ExitCode != 0 {
		r.Detail = fmt.Sprintf("the recompute command failed (exit %d): %s", res.ExitCode, lastLine(res.Stderr, res.Stdout))
		return r
	}
	if res.StdoutBytes > int64(len(res.Stdout)) {
		r.Detail = fmt.Sprintf("the recompute command printed %d bytes, more than the %d that can be compared", res.StdoutBytes, maxCompared)
		return r
	}
	r.Passed, r.Detail = compare(env.Outputs, c, string(res.Stdout))
	return r
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
