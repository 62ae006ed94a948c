// Package live is a run's live control, its side of the user message
// queue: before each model call it applies control commands (pause, resume,
// cancel, budget and deadline changes) to the running agents, holds calls
// while the run is paused, records each user message once (as a message
// event, with the runtime's answer to a progress query or the control it
// carried) and delivers the rest into the coordinator's history; a message
// that changes the contract records a new contract version. Every change is
// a typed event appended before it takes effect (control, message,
// contract); Replay re-applies them to a resumed run without recording them
// again.
package live

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/taskstore"
)

// ErrUserCancel is the cause of a run cancelled by `apodex cancel`.
var ErrUserCancel = errors.New("run: cancelled by the user")

// Config is what a Control needs from its run.
type Config struct {
	Inbox *inbox.Inbox
	Log   *record.Log
	// Cancel ends the whole run (a cancel command, the hard timeout).
	Cancel context.CancelCauseFunc
	// Clock is the run's time: budget changes relative to now, and the
	// hard timeout's timer; nil is the system clock.
	Clock clock.Clock
	// Status answers a progress query from the board and the record.
	Status   func() string
	Budget   agent.Budget
	Contract *contract.Contract
}

// Control is one run's live control; its methods are safe for concurrent use
// by all the run's agents.
type Control struct {
	in     *inbox.Inbox
	log    *record.Log
	cancel context.CancelCauseFunc // ends the whole run
	clock  clock.Clock
	status func() string // a progress answer from the board and the record

	mu       sync.Mutex
	changed  chan struct{} // closed on a state change (see signal)
	paused   bool
	budget   agent.Budget
	soft     time.Time
	hard     *hardTimer
	contract *contract.Contract
	version  int
	revised  map[string]bool // messages that revised the contract
}

// New makes the live control of a run.
func New(cfg Config) *Control {
	clk := clock.Or(cfg.Clock)
	c := &Control{in: cfg.Inbox, log: cfg.Log, cancel: cfg.Cancel, clock: clk, status: cfg.Status, budget: cfg.Budget, contract: cfg.Contract}
	c.hard = &hardTimer{clock: clk, fire: func() { c.cancel(agent.ErrHardTimeout) }}
	return c
}

// SetTimeout sets the hard timeout (zero: none); a budget message may move it.
func (c *Control) SetTimeout(at time.Time) { c.hard.set(at) }

// SetSoftDeadline sets the soft deadline; a budget message may move it.
func (c *Control) SetSoftDeadline(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.soft = at
}

// SoftDeadline is the soft deadline in force (zero: none).
func (c *Control) SoftDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.soft
}

// Stop stops the hard timer.
func (c *Control) Stop() { c.hard.stop() }

// markRevised notes a message that revised the contract; c.mu is held.
func (c *Control) markRevised(id string) {
	if c.revised == nil {
		c.revised = map[string]bool{}
	}
	c.revised[id] = true
}

// hardTimer is the run's hard timeout, movable by a budget message.
type hardTimer struct {
	mu    sync.Mutex
	at    time.Time
	timer clock.Timer
	clock clock.Clock
	fire  func()
}

func (h *hardTimer) set(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil && !h.timer.Stop() {
		return // already fired
	}
	h.at, h.timer = at, nil
	if !at.IsZero() {
		h.timer = h.clock.AfterFunc(at.Sub(h.clock.Now()), h.fire)
	}
}

func (h *hardTimer) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}

// Adjust copies the user's budget and deadline changes into a loop.
func (c *Control) Adjust(b *agent.Budget, d *agent.Deadlines) {
	c.applyControls() // a change sent during the last turn counts before the budget check
	c.mu.Lock()
	defer c.mu.Unlock()
	*b = c.budget
	if !c.soft.IsZero() && !c.soft.Equal(d.Soft) {
		d.Soft = c.soft
	}
}

// Hold applies pending controls and blocks while the run is paused. It is
// every agent's gate before a model call: a paused run makes no model call
// and no dispatch; commands already running finish.
func (c *Control) Hold(ctx context.Context) {
	for {
		c.applyControls()
		c.mu.Lock()
		paused, changed := c.paused, c.changedCh()
		c.mu.Unlock()
		if !paused || ctx.Err() != nil {
			return
		}
		// Wake on a state change made by anyone (the watcher may be the one
		// that reads the resume) or on a new inbox line.
		wctx, cancel := context.WithCancel(ctx)
		select {
		case <-changed:
		case <-c.in.Notify(wctx):
		case <-ctx.Done():
		}
		cancel()
	}
}

// changedCh is closed at the next state change; c.mu is held.
func (c *Control) changedCh() chan struct{} {
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// signal wakes everyone waiting for a state change; c.mu is held.
func (c *Control) signal() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Wake is the lead's wait hook: it fires once a message that will reach the
// lead is pending (not a control, not a progress query the runtime answers),
// including one that arrived before the wait began.
func (c *Control) Wake(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		changes := c.in.Notify(ctx)
		for {
			if c.leadMessagePending() {
				out <- struct{}{}
				return
			}
			select {
			case <-ctx.Done():
				return
			case _, ok := <-changes:
				if !ok {
					return
				}
			}
		}
	}()
	return out
}

func (c *Control) leadMessagePending() bool {
	msgs, err := c.in.Pending()
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if _, _, isControl := inbox.AsControl(m.Text); !isControl && m.Class != inbox.ClassProgressQuery {
			return true
		}
	}
	return false
}

// BeforeCall is the coordinator's hook: the pause gate, then the user
// messages, in id order, as user messages marked with their class.
func (c *Control) BeforeCall(agentID string) func(ctx context.Context) []llm.Message {
	return func(ctx context.Context) []llm.Message {
		c.Hold(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var out []llm.Message
		c.in.Deliver(ctx, func(m inbox.Message) (int64, error) {
			msg, seq, err := c.deliver(agentID, m)
			if err == nil && msg != nil {
				out = append(out, *msg)
			}
			return seq, err
		})
		c.applyControls() // a message may have been a control
		return out
	}
}

// deliver records one user message; it returns the history message for the
// coordinator, or nil when the runtime answered it itself.
func (c *Control) deliver(agentID string, m inbox.Message) (*llm.Message, int64, error) {
	ev := record.Message{ID: m.ID, Text: m.Text, Class: string(m.Class), Sender: m.Sender, To: agentID}
	if m.Original != m.Text {
		ev.Original = m.Original
	}
	var msg *llm.Message
	switch kind, args, isControl := inbox.AsControl(m.Text); {
	case isControl:
		ev.Control = kind
		c.apply(m.ID, kind, args)
	case m.Class == inbox.ClassProgressQuery && c.status != nil:
		ev.Answer = c.status() // answered from the board, without disturbing work
	default:
		changes := inbox.ChangesContract(m.Class, m.Text) || m.Sender == inbox.SenderContinue
		ev.ChangesContract = changes
		msg = &llm.Message{Role: llm.RoleUser, Content: checkpoint.UserMessage(m.ID, string(m.Class), m.Text)}
		if changes {
			c.revise(m)
		}
	}
	seq, err := c.log.Append(record.TypeMessage, "user", ev)
	if err != nil {
		return nil, 0, err
	}
	return msg, seq, c.log.Sync()
}

// revise starts a new contract from a message that changes the objective,
// a deliverable or an acceptance clause (R-CONTRACT-3): the workspace and the
// board carry over; new /outputs paths the message names become deliverables.
func (c *Control) revise(m inbox.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revised[m.ID] {
		return // revised before a stop that came before the message was recorded
	}
	c.version++
	next := c.contract.Revise(m.Text)
	c.contract = next
	ev := taskstore.Event(next)
	ev.Version, ev.Reason, ev.Message, ev.Text = c.version+1, "user message "+m.ID, m.ID, m.Text
	c.log.Append(record.TypeContract, "user", ev)
	if err := c.log.Sync(); err == nil {
		c.markRevised(m.ID)
	}
}

// applyControls applies the control commands sent since the last look.
func (c *Control) applyControls() {
	cmds, err := c.in.Controls()
	if err != nil {
		return
	}
	for _, cmd := range cmds {
		detail := c.apply(cmd.ID, cmd.Kind, cmd.Args)
		seq, err := c.log.Append(record.TypeControl, "user", record.Control{ID: cmd.ID, Kind: cmd.Kind, Args: cmd.Args, Result: detail})
		if err == nil {
			c.log.Sync()
			c.in.MarkApplied(cmd.ID, seq)
		}
	}
}

// apply acts on one control; it returns what it did.
func (c *Control) apply(id, kind string, args map[string]string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.signal()
	switch kind {
	case inbox.ControlPause:
		c.paused = true
		return "paused: no new model calls until resume"
	case inbox.ControlResume:
		c.paused = false
		return "resumed"
	case inbox.ControlCancel:
		c.paused = false
		c.cancel(fmt.Errorf("%w (%s)", ErrUserCancel, id))
		return "cancelled"
	case inbox.ControlBudget:
		return c.applyBudget(args)
	}
	return "unknown control " + kind
}

// applyBudget changes limits; a value with + or - is relative. c.mu is held.
func (c *Control) applyBudget(args map[string]string) string {
	var done []string
	num := func(cur int, v string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimLeft(v, "+-"))
		if err != nil {
			return cur, false
		}
		switch v[0] {
		case '+':
			return cur + n, true
		case '-':
			return max(cur-n, 0), true
		}
		return n, true
	}
	when := func(cur time.Time, v string) (time.Time, bool) {
		d, err := time.ParseDuration(strings.TrimLeft(v, "+-"))
		if err != nil {
			return cur, false
		}
		base := cur
		if base.IsZero() || (v[0] != '+' && v[0] != '-') {
			base = c.clock.Now()
		}
		if v[0] == '-' {
			return base.Add(-d), true
		}
		return base.Add(d), true
	}
	for k, v := range args {
		if v == "" {
			continue
		}
		ok := false
		switch k {
		case "turns":
			c.budget.MaxTurns, ok = num(c.budget.MaxTurns, v)
		case "tool_calls":
			c.budget.MaxToolCalls, ok = num(c.budget.MaxToolCalls, v)
		case "tokens":
			c.budget.MaxTokens, ok = num(c.budget.MaxTokens, v)
		case "deadline":
			c.soft, ok = when(c.soft, v)
		case "timeout":
			var at time.Time
			if at, ok = when(c.hard.at, v); ok {
				c.hard.set(at)
			}
		}
		if ok {
			done = append(done, k+"="+v)
		}
	}
	if len(done) == 0 {
		return "no budget setting understood (use turns=, tool_calls=, tokens=, deadline=, timeout=)"
	}
	return "budget changed: " + strings.Join(done, " ") + "; now " + c.budgetNow()
}

// budgetNow renders the budgets in force for people (c.mu held).
func (c *Control) budgetNow() string {
	limit := func(n int) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.Itoa(n)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "none"
		}
		return t.UTC().Format("15:04:05 UTC")
	}
	return fmt.Sprintf("turns %s, tool calls %s, tokens %s, soft deadline %s, timeout %s",
		limit(c.budget.MaxTurns), limit(c.budget.MaxToolCalls), limit(c.budget.MaxTokens), at(c.soft), at(c.hard.at))
}

// Current is the contract in force.
func (c *Control) Current() *contract.Contract {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.contract
}

// Replay re-applies recorded controls (pause state, budget and deadline
// changes) to a resumed run, without recording them again: those applied
// as control commands and those that arrived inside user messages. It also
// takes up the contract's version count.
func (c *Control) Replay(st *runstate.State) {
	texts := map[int64]string{}
	for _, m := range st.Messages {
		texts[m.Seq] = m.Text
	}
	for _, ctl := range st.Controls {
		kind, args := ctl.Kind, ctl.Args
		if ctl.FromMessage {
			k, a, ok := inbox.AsControl(texts[ctl.Seq])
			if !ok {
				continue
			}
			kind, args = k, a
		}
		if kind != inbox.ControlCancel {
			c.apply(ctl.ID, kind, args)
		}
	}
	c.mu.Lock()
	c.version = max(len(st.Contracts)-1, 0)
	for _, v := range st.Contracts {
		if v.Message != "" {
			c.markRevised(v.Message)
		}
	}
	c.mu.Unlock()
}

// Watch applies control commands as they arrive, while agents are busy in
// model calls or commands: a cancel ends the run at once (in-flight calls
// and commands are cancelled), a pause takes hold at the next model call.
// stop ends the watcher and waits for it, so nothing is written after the
// run closes its record.
func (c *Control) Watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if c.in.Wait(ctx) != nil {
				return
			}
			c.applyControls()
		}
	}()
	return func() { cancel(); <-done }
}
