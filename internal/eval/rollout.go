package eval

import (
	"bytes"
	"cmp"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/world"
)

type roller struct {
	opts  Options
	store *world.Store
	sink  *sink
	// onStart, if set, hears the run id before the run starts.
	onStart func(runID string)
}

// rollout runs world pw under configuration c once and scores it.
func (r *roller) rollout(ctx context.Context, pw PlanWorld, c Config, index int) Result {
	res := Result{World: pw.ID, WorldName: pw.Name, Family: pw.Family, Level: pw.Level, Config: c.Name, Rollout: index, Status: run.StatusFailed}
	fail := func(err error) Result {
		res.Error = err.Error()
		res.FinishedAt = r.opts.Clock.Now().UTC()
		return res
	}
	w, err := r.store.Get(pw.ID)
	if err != nil {
		return fail(err)
	}
	task, err := w.Contract()
	if err != nil {
		return fail(err)
	}
	model, info, err := r.opts.NewModel(c, w)
	if err != nil {
		return fail(err)
	}
	id := run.NewID(r.opts.Clock.Now())
	runDir := filepath.Join(r.opts.Home, "runs", id)
	if r.sink != nil {
		r.sink.start(key{pw.ID, c.Name, index}, id)
	}
	if r.onStart != nil {
		r.onStart(id)
	}
	iv := &intervener{dir: runDir, plan: c.Interventions}
	cfg := run.Config{Settings: rolloutSettings(c, task.Budget, r.opts.Sandbox), Home: r.opts.Home, Contract: task, World: w,
		Model: model, ModelInfo: info, Progress: iv, NewID: func() string { return id }, Clock: r.opts.Clock}
	s, err := run.Execute(ctx, cfg)
	res.RunID, res.Status, res.Termination = s.RunID, s.Status, s.Termination
	if err != nil && s.RunID == "" {
		return fail(err)
	}
	score, err := scoreRun(runDir, iv.reflected())
	if err != nil {
		return fail(err)
	}
	res.Score = score
	res.FinishedAt = r.opts.Clock.Now().UTC()
	return res
}

// rolloutSettings are a rollout's settings: run.Defaults, the world's task
// budget over them and the configuration's budget over that.
func rolloutSettings(c Config, b contract.Budget, sbx string) run.Settings {
	s := run.Defaults()
	s.Mode = cmp.Or(c.Mode, run.ModeReact)
	s.Sandbox = cmp.Or(sbx, s.Sandbox)
	d := s.Budget
	s.Budget = record.BudgetSettings{MaxTurns: pick(c.Budget.Turns, b.Turns, d.MaxTurns), MaxToolCalls: pick(c.Budget.ToolCalls, b.ToolCalls, d.MaxToolCalls),
		MaxTokens: pick(c.Budget.Tokens, b.Tokens, d.MaxTokens)}
	s.Timeout = record.Duration(pickDur(c.Budget.Timeout, b.Timeout))
	s.SoftDeadline = record.Duration(b.SoftDeadline)
	s.Limits = run.BudgetLimits(s.Limits, b)
	// A rollout's team has run without effort waves and synthesis; a suite
	// cannot turn them on yet.
	s.Team.Effort, s.Team.Synthesis = run.EffortOff, run.SynthesisOff
	return s
}

func pick(xs ...int) int {
	for _, x := range xs {
		if x > 0 {
			return x
		}
	}
	return 0
}

func pickDur[T ~int64](xs ...T) T {
	for _, x := range xs {
		if x > 0 {
			return x
		}
	}
	return 0
}

// stepLine is a progress line of the main agent or the lead.
var stepLine = regexp.MustCompile(`^\[(?:main|lead)\] turn (\d+) `)

// intervener reads the run's progress lines (written synchronously after
// each tool call) and sends each scheduled intervention into the run's
// inbox once the main agent or lead is on turn after_turns: the message
// is there before its next model call.
type intervener struct {
	mu   sync.Mutex
	dir  string
	plan []Intervention
	sent []bool
	buf  []byte
}

func (iv *intervener) Write(p []byte) (int, error) {
	if len(iv.plan) == 0 {
		return len(p), nil
	}
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.sent == nil {
		iv.sent = make([]bool, len(iv.plan))
	}
	iv.buf = append(iv.buf, p...)
	for {
		i := bytes.IndexByte(iv.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(iv.buf[:i])
		iv.buf = iv.buf[i+1:]
		m := stepLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		turn, _ := strconv.Atoi(m[1])
		for j, x := range iv.plan {
			if !iv.sent[j] && turn >= x.AfterTurns {
				if _, err := inbox.Send(iv.dir, "eval", x.Text); err == nil {
					iv.sent[j] = true
				}
			}
		}
	}
}

// reflected judges each scheduled intervention on the terminal state: its
// expect.path holds expect.contains. Nil when none was scheduled.
func (iv *intervener) reflected() []bool {
	if len(iv.plan) == 0 {
		return nil
	}
	out := make([]bool, len(iv.plan))
	for i, x := range iv.plan {
		rel, ok := planeFile(x.Expect.Path)
		if !ok {
			continue
		}
		b, err := runfiles.ReadFile(iv.dir, filepath.ToSlash(rel), 0)
		out[i] = err == nil && strings.Contains(string(b), x.Expect.Contains)
	}
	return out
}

// planeFile maps /outputs/… or /workspace/… into the run directory.
func planeFile(p string) (string, bool) {
	clean := filepath.ToSlash(filepath.Clean(p))
	for _, plane := range []string{"/outputs/", "/workspace/"} {
		if strings.HasPrefix(clean, plane) && !strings.Contains(clean, "..") {
			return filepath.FromSlash(strings.TrimPrefix(clean, "/")), true
		}
	}
	return "", false
}
