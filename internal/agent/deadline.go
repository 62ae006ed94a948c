package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// ErrSoftDeadline is the context cause at the soft deadline.
var ErrSoftDeadline = errors.New("agent: soft deadline reached")

// Deadlines bound an agent in wall-clock time (R-TIME). Zero values disable.
type Deadlines struct {
	// Soft ends the loop normally and triggers one tool-free finalization
	// call that salvages completed work.
	Soft time.Time
	// WrapUp is how long before Soft the agent is told to wrap up.
	WrapUp time.Duration
	// Finalize bounds the finalization call (default 60 s, never past the
	// parent context's deadline).
	Finalize time.Duration
}

// softTimer cancels the loop's context at the soft deadline. The deadline is
// on the injected clock, and so is the timer (Config.Clock); it can be moved while
// the loop runs (a user extends the deadline).
type softTimer struct {
	clock clock.Clock
	fire  func()
	timer clock.Timer
	at    time.Time
}

func newSoftTimer(c clock.Clock, fire func()) *softTimer { return &softTimer{clock: c, fire: fire} }

func (s *softTimer) set(at, now time.Time) {
	if at.Equal(s.at) {
		return
	}
	s.at = at
	if s.timer != nil && !s.timer.Stop() {
		return // already fired: the loop is ending
	}
	s.timer = nil
	if !at.IsZero() {
		s.timer = s.clock.AfterFunc(at.Sub(now), s.fire)
	}
}

func (s *softTimer) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// checkDeadline runs before each model call: it tells the agent to wrap up
// once, and reports whether the soft deadline has passed. The notice goes
// out at the later of WrapUp and about two median steps before the
// deadline, so that at least one model call carries it even when one step
// is longer than WrapUp.
func (l *loop) checkDeadline() bool {
	d := l.cfg.Deadlines
	if d.Soft.IsZero() {
		return false
	}
	now := l.cfg.Clock.Now()
	if !now.Before(d.Soft) {
		return true
	}
	if !l.warned && d.WrapUp > 0 && !now.Before(d.Soft.Add(-max(d.WrapUp, 2*l.medianStep()))) {
		l.warned = true
		left := d.Soft.Sub(now).Round(time.Second)
		l.observe("wrap_up", fmt.Sprintf("The soft deadline is in %s. Wrap up now: finish the step you are on, make sure your results are written to files, and call finish with a summary. Commands and retries are cut off at the deadline.", left))
	}
	return false
}

// medianStep is the median time between the starts of this process's
// consecutive model calls (a model call and its tools); 0 before two calls.
func (l *loop) medianStep() time.Duration {
	if len(l.starts) < 2 {
		return 0
	}
	steps := make([]time.Duration, 0, len(l.starts)-1)
	for i := 1; i < len(l.starts); i++ {
		steps = append(steps, l.starts[i].Sub(l.starts[i-1]))
	}
	slices.Sort(steps)
	return steps[len(steps)/2]
}

const finalizePrompt = "[runtime observation] The soft deadline has passed; no more tools can run. In plain text, without calling tools, give the partial result: what was completed (with the files that hold it), what is verified, and what remains undone."

// finalize is the bounded, tool-free salvage call at the soft deadline. When
// the model cannot answer in time, a partial result is built from the
// history instead, so there is always one.
func (l *loop) finalize(ctx context.Context, model llm.Model) string {
	timeout := l.cfg.Deadlines.Finalize
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	fctx, cancel := context.WithTimeout(llm.WithCaller(ctx, llm.Caller{Role: llm.CallerSalvage}), timeout)
	defer cancel()
	l.history = append(l.history, llm.Message{Role: llm.RoleUser, Content: finalizePrompt})
	l.append(record.TypeObservation, record.Observation{Kind: "finalize", Text: finalizePrompt})
	l.turns++
	// The tools are listed, none may be called: a history with tool calls
	// and no tools is a request some providers refuse.
	specs := l.tools.Specs()
	l.checkHistory()
	l.recordRequest(specs)
	req := &llm.Request{Messages: l.history, Tools: specs, ToolChoice: llm.ToolChoiceNone, Turn: l.turns - 1, Purpose: llm.PurposeFinalize, Agent: l.cfg.ID}
	start := l.cfg.Clock.Now()
	resp, err := model.Generate(fctx, req)
	pr := record.PartialResult{Source: "model"}
	if err == nil {
		// Recorded even when empty: its usage counts.
		resp.Message.Role, resp.Message.ToolCalls = llm.RoleAssistant, nil // tool-free: any call is ignored
		l.usage = l.usage.Add(resp.Usage)
		l.history = append(l.history, resp.Message)
		l.recorded = len(l.history)
		l.respSeq = l.append(record.TypeModelResponse, record.ModelResponse{Request: l.reqSeq, Turn: l.turns, Purpose: record.PurposeFinalize, Message: l.storeMessage(resp.Message), Usage: resp.Usage,
			FinishReason: resp.FinishReason, Model: resp.Model, DurationMS: l.cfg.Clock.Now().Sub(start).Milliseconds()})
		pr.Text = strings.TrimSpace(resp.Message.Content)
	}
	if pr.Text == "" {
		if err == nil {
			err = errors.New("empty reply")
		}
		pr.Source, pr.Error, pr.Text = "fallback", err.Error(), l.fallbackPartial()
	}
	l.append(record.TypePartialResult, pr)
	l.sync()
	return pr.Text
}

// fallbackPartial summarizes the history mechanically.
func (l *loop) fallbackPartial() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The soft deadline passed after %d turns and %d tool calls; the model gave no final summary.", l.turns, l.toolCalls)
	var written []string
	seen := map[string]bool{}
	for _, m := range l.history {
		for _, tc := range m.ToolCalls {
			if tc.Name == "write_file" || tc.Name == "edit_file" {
				if p := argPath(tc.Arguments); p != "" && !seen[p] {
					seen[p] = true
					written = append(written, p)
				}
			}
		}
	}
	if len(written) > 0 {
		fmt.Fprintf(&b, " Files written with file tools: %s.", strings.Join(written, ", "))
	}
	for i := len(l.history) - 1; i >= 0; i-- {
		if m := l.history[i]; m.Role == llm.RoleAssistant && strings.TrimSpace(m.Content) != "" {
			fmt.Fprintf(&b, " Last note from the agent: %s", shorten(m.Content, 500))
			break
		}
	}
	return b.String()
}

func argPath(args string) string {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal([]byte(args), &a) != nil {
		return ""
	}
	return a.Path
}
