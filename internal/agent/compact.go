package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// Context configures compaction (R-CTX). Window 0 disables it.
type Context struct {
	// Window is the model's context window in tokens.
	Window int
	// At is the fraction of Window at which compaction starts (default 0.8).
	At float64
	// To is the fraction of Window compaction aims for (default 0.5).
	To float64
	// KeepRecent is how many of the newest tool results stay intact
	// (default 2).
	KeepRecent int
	// KeepTail is how many of the newest messages tier 2 keeps verbatim
	// (default 6).
	KeepTail int
}

// WithDefaults fills unset fields: At 0.8, To 0.5, KeepRecent 2, KeepTail 6.
func (c Context) WithDefaults() Context {
	if c.At <= 0 || c.At > 1 {
		c.At = 0.8
	}
	if c.To <= 0 || c.To >= c.At {
		c.To = min(0.5, c.At*0.6)
	}
	if c.KeepRecent <= 0 {
		c.KeepRecent = 2
	}
	if c.KeepTail <= 0 {
		c.KeepTail = 6
	}
	return c
}

// compactor holds what compaction needs across turns.
type compactor struct {
	cfg Context
	// lastPrompt and lastCompletion are the previous call's usage;
	// sinceLast is the history length then.
	lastPrompt, lastCompletion, sinceLast int
	reported                              bool
	// evicted keeps the full bodies of stubbed observations for recall.
	evicted *Evicted
	// quietUntil: after a compaction that bought no relief, no new attempt
	// until the history has grown past this length.
	quietUntil int
}

// estimateTokens is the fallback when a provider reports no usage: about
// four characters a token, plus a little per message.
func estimateTokens(msgs []llm.Message) int {
	n := 0
	for i := range msgs {
		n += messageTokens(&msgs[i])
	}
	return n
}

func messageTokens(m *llm.Message) int {
	c := utf8.RuneCountInString(m.Content)
	for _, tc := range m.ToolCalls {
		c += len(tc.Name) + utf8.RuneCountInString(tc.Arguments)
	}
	return c/4 + 4
}

// promptTokens predicts the next request's prompt size: the provider's
// count for the last request, its reply, and an estimate of what was added
// since. Without a reported count the whole history is estimated.
func (l *loop) promptTokens() (tokens int, estimated bool) {
	c := l.compact
	if !c.reported || c.sinceLast > len(l.history) {
		return estimateTokens(l.history), true
	}
	return c.lastPrompt + c.lastCompletion + estimateTokens(l.history[c.sinceLast:]), false
}

// maybeCompact runs before a model call: tier 1 when the context is past
// the threshold, tier 2 only if tier 1 did not reach the target.
func (l *loop) maybeCompact(ctx context.Context, model llm.Model) {
	c := l.compact
	if c == nil || c.cfg.Window <= 0 || len(l.history) < c.quietUntil {
		return
	}
	before, estimated := l.promptTokens()
	threshold := int(float64(c.cfg.Window) * c.cfg.At)
	if before < threshold {
		return
	}
	after := l.compactTier(ctx, model, 1, before, estimated, nil)
	if after > c.target() {
		after = l.compactTier(ctx, model, 2, after, true, nil)
	}
	// Escalation follows measured relief: a compaction that freed less than
	// a twentieth of the window is not tried again until the history grows.
	if before-after < c.cfg.Window/20 {
		c.quietUntil = len(l.history) + 2*c.cfg.KeepTail
		l.append(record.TypeCompaction, record.Compaction{Tier: 0, TokensBefore: before, TokensAfter: after, Window: c.cfg.Window,
			Stopped: fmt.Sprintf("no relief: %d → %d tokens; not retried for %d messages", before, after, 2*c.cfg.KeepTail)})
	}
}

func (c *compactor) target() int { return int(float64(c.cfg.Window) * c.cfg.To) }

// compactTier runs one tier on a history of the given size, records it
// (with the overflow that forced it, if any) and returns the new size.
func (l *loop) compactTier(ctx context.Context, model llm.Model, tier, before int, estimated bool, overflow *record.Compaction) int {
	c := l.compact
	ev := record.Compaction{Tier: tier, TokensBefore: before, Estimated: estimated, Window: c.cfg.Window, Target: c.target()}
	if overflow != nil {
		ev.Reason, ev.ProviderError = overflow.Reason, overflow.ProviderError
	}
	after := before
	if tier == 1 {
		after = l.evict(before, ev.Target, &ev)
	} else {
		after = l.summarize(ctx, model, before, &ev)
	}
	ev.TokensAfter = after
	l.append(record.TypeCompaction, ev)
	c.reported = false // the next usage report measures the new history
	c.sinceLast = len(l.history)
	// The history was rewritten: the next model_request records it whole
	// (from 0), so the record always rebuilds the exact request.
	l.recorded = 0
	return after
}

// evict is tier 1: replace the bodies of older tool results, oldest first,
// with stubs, until the estimate reaches target. The newest KeepRecent tool
// results and protected messages are kept.
func (l *loop) evict(tokens, target int, ev *record.Compaction) int {
	var toolIdx []int
	for i, m := range l.history {
		if m.Role == llm.RoleTool {
			toolIdx = append(toolIdx, i)
		}
	}
	if len(toolIdx) <= l.compact.cfg.KeepRecent {
		return tokens
	}
	args := l.callArgs()
	// Oldest first, sparing the newest KeepRecent results; when that is not
	// enough, the recent ones too — all but the very newest result, which
	// always stays intact.
	for _, candidates := range [][]int{toolIdx[:len(toolIdx)-l.compact.cfg.KeepRecent], toolIdx[:len(toolIdx)-1]} {
		for _, i := range candidates {
			if tokens <= target {
				return tokens
			}
			tokens = l.stub(i, tokens, args, ev)
		}
	}
	return tokens
}

// stub replaces the body of the tool result at i with a stub, unless it is
// protected, already a stub or too small to matter; it returns the new
// token estimate.
func (l *loop) stub(i, tokens int, args map[string]string, ev *record.Compaction) int {
	m := &l.history[i]
	if _, done := l.compact.evicted.get(m.ToolCallID); m.Protected || done || len(m.Content) < 256 {
		return tokens
	}
	sum := sha256.Sum256([]byte(args[m.ToolCallID]))
	stub := fmt.Sprintf("[evicted to save context: %s result, arguments sha256:%s, %d bytes; the full body is in the record; call recall {\"ref\": %q} to see it again]",
		m.Name, hex.EncodeToString(sum[:6]), len(m.Content), m.ToolCallID)
	tokens -= messageTokens(m)
	l.compact.evicted.put(m.ToolCallID, m.Content)
	m.Content = stub
	tokens += messageTokens(m)
	ev.Evicted = append(ev.Evicted, m.ToolCallID)
	return tokens
}

func (l *loop) callArgs() map[string]string {
	args := make(map[string]string)
	for _, m := range l.history {
		for _, tc := range m.ToolCalls {
			args[tc.ID] = tc.Arguments
		}
	}
	return args
}

const summaryPrompt = `You condense the middle of an agent's working history so the agent can continue.
Write a faithful summary for the agent itself: what was asked, what was done (tools, commands, files read and written, with exact paths), what was learned (numbers, facts, with their source), what failed and why, and what remains open. Do not invent anything. Plain text, at most 400 words.`

// summarize is tier 2: an LLM summary of the middle of the history; the head
// (system prompt, task) and the recent tail stay verbatim, protected
// messages are carried over untouched. The middle is summarized in chunks
// that fit the window, so the summary call itself cannot overflow.
func (l *loop) summarize(ctx context.Context, model llm.Model, tokens int, ev *record.Compaction) int {
	head := 2
	tail := l.tailStart()
	if tail-head < 2 {
		ev.Stopped = "nothing to summarize between the task and the recent tail"
		return tokens
	}
	middle := l.history[head:tail]
	var protected []llm.Message
	var plain []llm.Message
	for _, m := range middle {
		// An earlier summary is folded into the new one; other protected
		// messages (subagent reports) are carried over verbatim. A
		// protected tool result loses the call it answered to the summary,
		// so it is carried as a user message that says what it is: a result
		// without its call is a request every provider rejects.
		if m.Protected && !strings.HasPrefix(m.Content, summaryMarker) {
			protected = append(protected, carried(m))
		} else {
			plain = append(plain, m)
		}
	}
	budget := max(l.compact.cfg.Window/2, 256)
	summary := ""
	for start := 0; start < len(plain); {
		end, size := start, estimateTokens([]llm.Message{{Content: summary}})
		for end < len(plain) && (end == start || size+messageTokens(&plain[end]) <= budget) {
			size += messageTokens(&plain[end])
			end++
		}
		chunk := renderForSummary(plain[start:end], budget*4)
		prompt := chunk
		if summary != "" {
			prompt = "Summary so far:\n" + summary + "\n\nLater history:\n" + chunk
		}
		began := l.cfg.Clock.Now()
		resp, err := model.Generate(llm.WithCaller(ctx, llm.Caller{Role: llm.CallerSummarizer}), &llm.Request{Purpose: llm.PurposeSummary, Turn: l.turns, Agent: l.cfg.ID, Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: summaryPrompt},
			{Role: llm.RoleUser, Content: prompt},
		}})
		if err != nil {
			ev.Stopped = "summary call failed: " + err.Error()
			return tokens
		}
		l.usage = l.usage.Add(resp.Usage)
		resp.Message.Role = llm.RoleAssistant
		l.append(record.TypeModelResponse, record.ModelResponse{Turn: l.turns, Purpose: record.PurposeSummary, Message: l.storeMessage(resp.Message),
			Usage: resp.Usage, FinishReason: resp.FinishReason, Model: resp.Model, DurationMS: l.cfg.Clock.Now().Sub(began).Milliseconds()})
		summary = strings.TrimSpace(resp.Message.Content)
		start = end
	}
	if summary == "" {
		ev.Stopped = "the summary came back empty"
		return tokens
	}
	sm := llm.Message{Role: llm.RoleUser, Protected: true, Content: summaryMarker + summary}
	ev.Summarized = &record.Summarized{Messages: len(plain), Summary: summary, Carried: len(protected)}
	// Measured like tokens (which may be the provider's count, tool specs
	// included): what leaves minus what comes in.
	after := tokens - estimateTokens(plain) + messageTokens(&sm)
	if after >= tokens {
		ev.Stopped = fmt.Sprintf("the summary (%d tokens) would not shrink the %d messages it replaces; history kept", messageTokens(&sm), len(plain))
		return tokens
	}
	rest := append([]llm.Message{sm}, protected...)
	rest = append(rest, l.history[tail:]...)
	l.history = append(l.history[:head:head], rest...)
	return after
}

// carried is a protected message as it stays after a tier-2 summary: a
// tool result becomes a user message naming its tool and call, its text
// kept; anything else is kept as is.
func carried(m llm.Message) llm.Message {
	if m.Role != llm.RoleTool {
		return m
	}
	status := ""
	if m.IsError {
		status = " (an error)"
	}
	return llm.Message{Role: llm.RoleUser, Protected: true,
		Content: fmt.Sprintf("%sThe result of your earlier %s call %s%s, kept verbatim (the call itself is in the summary):\n%s", carriedMarker, m.Name, m.ToolCallID, status, m.Content)}
}

// carriedMarker begins a protected result carried past a tier-2 summary.
const carriedMarker = "[runtime observation] "

// summaryMarker begins the message that holds a tier-2 summary.
const summaryMarker = "[runtime observation] Summary of earlier work (older messages were condensed to save context):\n"

// tailStart is the first index of the verbatim tail: about KeepTail
// messages back, moved earlier so a tool result is never separated from the
// assistant message that called it.
func (l *loop) tailStart() int {
	i := max(len(l.history)-l.compact.cfg.KeepTail, 2)
	for i > 2 && l.history[i].Role == llm.RoleTool {
		i--
	}
	return i
}

func renderForSummary(msgs []llm.Message, maxChars int) string {
	var b strings.Builder
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleTool:
			fmt.Fprintf(&b, "[%s result] %s\n", m.Name, m.Content)
		case len(m.ToolCalls) > 0:
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(&b, "[assistant calls %s %s]\n", tc.Name, tc.Arguments)
			}
			if m.Content != "" {
				fmt.Fprintf(&b, "[assistant] %s\n", m.Content)
			}
		default:
			fmt.Fprintf(&b, "[%s] %s\n", m.Role, m.Content)
		}
	}
	s := b.String()
	if len(s) > maxChars {
		s = s[:maxChars] + "\n[… cut to fit the summary call]"
	}
	return s
}

// Evicted keeps the full bodies of evicted observations so the recall tool
// can give them back. It is safe for concurrent use.
type Evicted struct {
	mu     sync.Mutex
	bodies map[string]string
}

// NewEvicted returns an empty store.
func NewEvicted() *Evicted { return &Evicted{bodies: make(map[string]string)} }

func (e *Evicted) put(ref, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bodies[ref] = body
}

func (e *Evicted) get(ref string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.bodies[ref]
	return b, ok
}

type recallArgs struct {
	Ref string `json:"ref" desc:"The id named in an evicted result's stub."`
}

// Tool is recall: it shows an evicted observation's full body again, so
// compaction loses nothing the model may need.
func (e *Evicted) Tool() tool.Tool {
	return tool.Define("recall", "Show again the full body of a tool result that was evicted to save context; its stub names the ref.", 4*tool.DefaultObservationLimit,
		func(_ context.Context, a recallArgs) tool.Result {
			body, ok := e.get(a.Ref)
			if !ok {
				return tool.Errorf("no evicted result with ref %q; refs are named in the stubs of evicted results", a.Ref)
			}
			return tool.Result{Output: body}
		})
}
