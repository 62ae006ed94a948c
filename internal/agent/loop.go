package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// Run drives one agent from its task to a termination.
func Run(ctx context.Context, cfg Config, task string) Outcome {
	cfg.defaults()
	ctx = llm.WithCaller(ctx, llm.Caller{Agent: cfg.ID, Role: cfg.Role})
	l := &loop{cfg: cfg, tools: cfg.Tools, callIDs: make(map[string]bool)}
	if cfg.Context.Window > 0 {
		ev := cfg.Evicted
		if ev == nil {
			ev = NewEvicted()
			l.tools = l.tools.With(ev.Tool())
		}
		l.compact = &compactor{cfg: cfg.Context.WithDefaults(), evicted: ev}
	}
	if r := cfg.Restore; r != nil {
		// The next request records the whole history (from 0), so the
		// record rebuilds it whatever happened before the stop.
		l.history = append([]llm.Message(nil), r.History...)
		l.turns, l.toolCalls, l.usage = r.Turns, r.ToolCalls, r.Usage
		for _, m := range l.history {
			for _, c := range m.ToolCalls {
				l.callIDs[c.ID] = true
			}
		}
	} else {
		l.history = append(l.history, llm.Message{Role: llm.RoleSystem, Content: cfg.System})
		l.history = append(l.history, llm.Message{Role: llm.RoleUser, Content: task})
	}
	model := l.retrying()
	loopCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.soft = newSoftTimer(l.cfg.Clock, func() { cancel(ErrSoftDeadline) })
	defer l.soft.stop()
	l.soft.set(cfg.Deadlines.Soft, cfg.Clock.Now())
	out := l.run(loopCtx, model)
	if out.Termination == SoftDeadline && ctx.Err() == nil {
		out.Partial = l.finalize(ctx, model)
	}
	out.Turns, out.ToolCalls, out.Usage, out.History = l.turns, l.toolCalls, l.usage, l.history
	return out
}

type loop struct {
	cfg      Config
	tools    *tool.Set
	history  []llm.Message
	recorded int // messages of history already in a model_request event
	// reqSeq and respSeq are the seqs of the last model_request and
	// model_response this loop recorded: the record chains a loop's calls.
	reqSeq, respSeq int64
	recordErr       error
	turns           int
	toolCalls       int
	usage           llm.Usage
	compact         *compactor // nil: no compaction
	warned          bool       // the wrap-up notice was given
	nudged          bool       // the last reply was tool-free and was nudged
	starts          []time.Time
	callIDs         map[string]bool
	soft            *softTimer
}

// retrying wraps the model with the retry policy, recording every retry.
func (l *loop) retrying() llm.Model {
	retry := l.cfg.Retry
	if retry.Clock == nil {
		retry.Clock = l.cfg.Clock // backoff waits on the agent's clock
	}
	onRetry := retry.OnRetry
	retry.OnRetry = func(attempt int, err error, wait time.Duration) {
		l.append(record.TypeModelRetry, record.ModelRetry{Turn: l.turns, Attempt: attempt, Error: err.Error(), WaitMS: wait.Milliseconds()})
		if onRetry != nil {
			onRetry(attempt, err, wait)
		}
	}
	return llm.WithRetry(l.cfg.Model, retry)
}

func (l *loop) run(ctx context.Context, model llm.Model) Outcome {
	for {
		if t, err, done := stopped(ctx); done {
			return Outcome{Termination: t, Err: err}
		}
		if l.cfg.Adjust != nil {
			l.cfg.Adjust(&l.cfg.Budget, &l.cfg.Deadlines)
			l.soft.set(l.cfg.Deadlines.Soft, l.cfg.Clock.Now())
		}
		b := l.cfg.Budget
		if b.MaxTurns > 0 && l.turns >= b.MaxTurns {
			return Outcome{Termination: BudgetTurns, Err: fmt.Errorf("turn budget of %d reached", b.MaxTurns)}
		}
		if l.checkDeadline() {
			return Outcome{Termination: SoftDeadline, Err: ErrSoftDeadline}
		}
		if l.cfg.BeforeCall != nil {
			l.history = append(l.history, l.cfg.BeforeCall(ctx)...)
			if t, err, done := stopped(ctx); done {
				return Outcome{Termination: t, Err: err}
			}
		}
		l.maybeCompact(ctx, model)
		resp, err := l.callFitting(ctx, model)
		if err != nil {
			if t, cerr, done := stopped(ctx); done {
				return Outcome{Termination: t, Err: cerr}
			}
			l.append(record.TypeModelError, record.ModelError{Turn: l.turns, Error: err.Error()})
			l.sync()
			return Outcome{Termination: ModelError, Err: err}
		}
		finish := l.act(ctx, resp.Message.ToolCalls)
		l.sync()
		if l.recordErr != nil {
			return Outcome{Termination: Crashed, Err: fmt.Errorf("the record cannot be written, stopping: %w", l.recordErr)}
		}
		if finish != nil {
			return Outcome{Termination: Completed, Summary: finish.Summary}
		}
		if len(resp.Message.ToolCalls) > 0 {
			l.nudged = false
		} else if summary, ok := l.toolFree(resp.Message.Content); ok {
			l.sync()
			return Outcome{Termination: Completed, Summary: summary}
		}
		if t, err, done := stopped(ctx); done {
			return Outcome{Termination: t, Err: err}
		}
		if b.MaxToolCalls > 0 && l.toolCalls >= b.MaxToolCalls {
			return Outcome{Termination: BudgetToolCalls, Err: fmt.Errorf("tool-call budget of %d reached", b.MaxToolCalls)}
		}
		if b.MaxTokens > 0 && l.usage.TotalTokens >= b.MaxTokens {
			return Outcome{Termination: BudgetTokens, Err: fmt.Errorf("token budget of %d reached (%d used)", b.MaxTokens, l.usage.TotalTokens)}
		}
	}
}

// toolFree handles a reply without tool calls: the first is nudged; the
// next consecutive one, unless finish is required, is offered to the gate as
// the finish summary. It reports whether the agent is done.
func (l *loop) toolFree(content string) (string, bool) {
	text := strings.TrimSpace(content)
	if l.nudged && !l.cfg.RequireFinish && text != "" {
		ev := record.TextFinish{Turn: l.turns, Summary: text, Accepted: true}
		var refused error
		if l.cfg.Gate != nil {
			refused = l.cfg.Gate(text)
		}
		if refused != nil {
			ev.Accepted, ev.Refused = false, refused.Error()
		}
		l.append(record.TypeTextFinish, ev)
		if refused == nil {
			return text, true
		}
		l.observe("finish_refused", fmt.Sprintf("Your answer was taken as your final summary, but finishing is refused: %v", refused))
		return "", false
	}
	l.nudged = true
	f := l.cfg.FinishTool
	if l.cfg.RequireFinish {
		l.observe("no_tool_call", fmt.Sprintf("You answered without calling a tool. Work is done through tools; only a %s call ends your work: when the objective is complete, call %s with a summary.", f, f))
	} else {
		l.observe("no_tool_call", fmt.Sprintf("You answered without calling a tool. Work is done through tools; when the objective is complete, call %s with a summary. If you answer again without calling a tool, that answer is taken as your final summary and your work ends.", f))
	}
	return "", false
}

// stopped reports whether ctx has ended, and as which termination.
func stopped(ctx context.Context) (Termination, error, bool) {
	if ctx.Err() == nil {
		return "", nil, false
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrHardTimeout):
		return HardTimeout, cause, true
	case errors.Is(cause, ErrSoftDeadline):
		return SoftDeadline, cause, true
	}
	return Cancelled, cause, true
}

// call makes one model call and records request and response.
func (l *loop) call(ctx context.Context, model llm.Model) (*llm.Response, error) {
	l.turns++
	specs := l.tools.Specs()
	l.checkHistory()
	l.recordRequest(specs)
	req := &llm.Request{Messages: l.history, Tools: specs, Turn: l.turns - 1, Agent: l.cfg.ID}
	start := l.cfg.Clock.Now()
	l.starts = append(l.starts, start)
	resp, err := model.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	if l.compact != nil {
		c := l.compact
		c.lastPrompt, c.lastCompletion, c.reported = resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.Reported && resp.Usage.PromptTokens > 0
		c.sinceLast = len(l.history) // the reply is counted in lastCompletion
	}
	resp.Message.Role = llm.RoleAssistant
	for i := range resp.Message.ToolCalls {
		// Ids must be unique in the history: some servers send none, or
		// restart their numbering every turn.
		tc := &resp.Message.ToolCalls[i]
		if tc.ID == "" || l.callIDs[tc.ID] {
			tc.ID = fmt.Sprintf("call_%d_%d", l.turns, i)
		}
		l.callIDs[tc.ID] = true
	}
	l.usage = l.usage.Add(resp.Usage)
	if l.turns == 1 {
		l.usage.Reported = resp.Usage.Reported
	}
	l.history = append(l.history, resp.Message)
	l.recorded = len(l.history)
	l.respSeq = l.append(record.TypeModelResponse, record.ModelResponse{
		Request:      l.reqSeq,
		Turn:         l.turns,
		Message:      l.storeMessage(resp.Message),
		Usage:        resp.Usage,
		FinishReason: resp.FinishReason,
		Model:        resp.Model,
		DurationMS:   l.cfg.Clock.Now().Sub(start).Milliseconds(),
		ResponseID:   resp.ID,
	})
	return resp, nil
}

// checkHistory records a warning when the history is not a valid
// conversation (llm.Problems): the clients repair it before sending, so the
// call still works, but a runtime bug broke the history and the record says
// so (tests assert there is none).
func (l *loop) checkHistory() {
	if p := llm.Problems(l.history); p != nil {
		l.append(record.TypeWarning, record.Warning{Code: record.WarnInvalidHistory,
			Message: fmt.Sprintf("turn %d: the history is not a valid conversation and is sent repaired: %s", l.turns, strings.Join(p, "; "))})
	}
}

// observe adds a runtime observation to the history and the record.
func (l *loop) observe(kind, text string) {
	l.append(record.TypeObservation, record.Observation{Kind: kind, Text: text})
	l.history = append(l.history, llm.Message{Role: llm.RoleUser, Content: "[runtime observation] " + text})
}

// append writes an event. A record that cannot be written ends the loop at
// the next step boundary (termination crashed): work must not go unrecorded.
func (l *loop) append(typ string, payload any) (seq int64) {
	seq, err := l.cfg.Log.Append(typ, l.cfg.ID, payload)
	if err != nil {
		l.recordErr = errors.Join(l.recordErr, err)
	}
	return seq
}

func (l *loop) sync() {
	if err := l.cfg.Log.Sync(); err != nil {
		l.recordErr = errors.Join(l.recordErr, err)
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
