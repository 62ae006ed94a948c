package otel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Semantic convention attribute keys.
const (
	opName        = "gen_ai.operation.name"
	providerName  = "gen_ai.provider.name"
	agentName     = "gen_ai.agent.name"
	agentID       = "gen_ai.agent.id"
	conversation  = "gen_ai.conversation.id"
	requestModel  = "gen_ai.request.model"
	requestStream = "gen_ai.request.stream"
	responseMod   = "gen_ai.response.model"
	responseID    = "gen_ai.response.id"
	inputTokens   = "gen_ai.usage.input_tokens"
	outputTokens  = "gen_ai.usage.output_tokens"
	cacheRead     = "gen_ai.usage.cache_read.input_tokens"
	cacheCreation = "gen_ai.usage.cache_creation.input_tokens"
	reasoningOut  = "gen_ai.usage.reasoning.output_tokens"
	finishReason  = "gen_ai.response.finish_reasons"
	toolName      = "gen_ai.tool.name"
	toolCallID    = "gen_ai.tool.call.id"
	toolType      = "gen_ai.tool.type"
	toolArgs      = "gen_ai.tool.call.arguments"
	toolResult    = "gen_ai.tool.call.result"
	inputMsgs     = "gen_ai.input.messages"
	outputMsgs    = "gen_ai.output.messages"
	systemInstr   = "gen_ai.system_instructions"
	serverAddress = "server.address"
	serverPort    = "server.port"
	errorType     = "error.type"
	tokenType     = "gen_ai.token.type"
)

// spans turns record events into spans as they come.
type spans struct {
	tracer  trace.Tracer
	dir     string
	capture bool

	runID  string
	model  record.ModelSettings
	server string
	port   int

	workflow     trace.Span // a team run's invoke_workflow span
	workflowCtx  context.Context
	workflowLast time.Time

	loops   []*loop
	byReq   map[int64]*loop
	byResp  map[int64]*loop
	byCall  map[string]*loop // agent + call id -> the loop whose reply made it
	byAgent map[string][]*loop
	tools   map[string]*toolSpan // agent + call id -> its open execute_tool span
	ended   map[string]*toolSpan // agent + call id -> an ended one (a dispatch returns before its subagent starts)
	seen    map[string]int       // loops per agent id
	assign  map[string]string    // assignment id -> its dispatch call id
	parent  map[string]string    // assignment id -> the agent that dispatched it
	roles   map[string]string
	taken   map[*toolSpan]bool

	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
}

// loop is one agent loop's invoke_agent span.
type loop struct {
	agent, id, role string
	ctx             context.Context
	span            trace.Span
	last            time.Time
	pending         int64
	hist            []llm.Message // the prompt as sent, kept only to capture content
	claim           string
}

type toolSpan struct {
	ctx        context.Context
	span       trace.Span
	name, args string
	start      time.Time
}

func newSpans(t trace.Tracer, dir string, capture bool) *spans {
	return &spans{tracer: t, dir: dir, capture: capture, byReq: map[int64]*loop{}, byResp: map[int64]*loop{}, byCall: map[string]*loop{},
		byAgent: map[string][]*loop{}, tools: map[string]*toolSpan{}, ended: map[string]*toolSpan{}, seen: map[string]int{}, assign: map[string]string{},
		parent: map[string]string{}, roles: map[string]string{}, taken: map[*toolSpan]bool{}}
}

// meters creates the two client metrics of the conventions.
func (s *spans) meters(m metric.Meter) {
	s.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used"),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	s.duration, _ = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration"),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
}

func (s *spans) add(ctx context.Context, e record.Event) {
	if !s.workflowLast.IsZero() || s.workflow != nil {
		s.workflowLast = e.Time
	}
	p, _ := record.DecodePayload(e) // nil for a type this version does not know
	switch p := p.(type) {
	case *record.RunStarted:
		s.started(*p, e.Time)
	case *record.RunFinished:
		s.close()
	case *record.Assignment:
		if p.State == "created" {
			s.assign[p.Assignment], s.parent[p.Assignment], s.roles[p.Assignment] = p.CallID, e.Agent, p.Role
		}
	case *record.ModelRequest:
		s.request(e, p)
	case *record.ModelResponse:
		s.response(ctx, e, p)
	case *record.ModelRetry:
		l := s.pendingLoop(e.Agent)
		attrs := append(s.chatAttrs(l), attribute.Int("apodex.attempt", p.Attempt), attribute.String(errorType, errorClass(p.Error)), attribute.Int64("apodex.seq", e.Seq))
		s.child(l, spanName("chat", s.model.Name), trace.SpanKindClient, e.Time, e.Time, attrs, p.Error)
		s.record(ctx, 0, 0, 0, "", errorClass(p.Error))
	case *record.ModelError:
		l := s.pendingLoop(e.Agent)
		s.child(l, spanName("chat", s.model.Name), trace.SpanKindClient, e.Time, e.Time, append(s.chatAttrs(l), attribute.String(errorType, errorClass(p.Error))), p.Error)
		s.record(ctx, 0, 0, 0, "", errorClass(p.Error))
	case *record.ToolCall:
		l := s.byCall[e.Agent+"\x00"+p.CallID]
		if l == nil {
			l = s.latest(e.Agent, e.Time)
		}
		tctx, span := s.tracer.Start(l.ctx, spanName("execute_tool", p.Name), trace.WithTimestamp(e.Time), trace.WithSpanKind(trace.SpanKindInternal))
		s.tools[e.Agent+"\x00"+p.CallID] = &toolSpan{ctx: tctx, span: span, name: p.Name, args: p.Arguments, start: e.Time}
		l.last = e.Time
	case *record.ToolResult:
		s.toolResult(e, p)
	case *record.Verdict:
		s.verdict(*p, e)
	default:
		if ls := s.byAgent[e.Agent]; len(ls) > 0 {
			ls[len(ls)-1].last = e.Time
		}
	}
}

func (s *spans) started(rs record.RunStarted, at time.Time) {
	s.runID, s.model = rs.RunID, rs.Model
	if u, err := url.Parse(rs.Model.BaseURL); err == nil && u.Host != "" {
		s.server = u.Hostname()
		if p, err := strconv.Atoi(u.Port()); err == nil {
			s.port = p
		} else if u.Scheme == "https" {
			s.port = 443
		} else if u.Scheme == "http" {
			s.port = 80
		}
	}
	if rs.Settings.Mode == "team" {
		attrs := []attribute.KeyValue{attribute.String(opName, "invoke_workflow"), attribute.String(agentName, "apodex team"),
			attribute.String(conversation, s.runID), attribute.String(providerName, provider(s.model.Provider))}
		if s.model.Name != "" {
			attrs = append(attrs, attribute.String(requestModel, s.model.Name))
		}
		s.workflowCtx, s.workflow = s.tracer.Start(context.Background(), "invoke_workflow apodex team", trace.WithTimestamp(at),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
		s.workflowLast = at
	}
}

// request continues its loop (follows) or starts a new one.
func (s *spans) request(e record.Event, mr *record.ModelRequest) {
	var msgs []llm.Message
	if s.capture || (mr.From == 0 && mr.Follows == 0) {
		for _, raw := range mr.Messages {
			msgs = append(msgs, s.message(raw))
		}
	}
	l := s.byResp[mr.Follows]
	if l == nil && mr.Follows == 0 && mr.From > 0 { // a record without the link
		if ls := s.byAgent[e.Agent]; len(ls) > 0 {
			l = ls[len(ls)-1]
		}
	}
	if l == nil {
		l = s.startLoop(e.Agent, e.Time, msgs)
	}
	if s.capture {
		from := min(mr.From, len(l.hist))
		l.hist = append(l.hist[:from:from], msgs...)
	}
	l.pending, l.last = e.Seq, e.Time
	s.byReq[e.Seq] = l
}

// startLoop opens an agent loop's invoke_agent span under the call that
// started it.
func (s *spans) startLoop(agent string, at time.Time, first []llm.Message) *loop {
	s.seen[agent]++
	id := agent
	if n := s.seen[agent]; n > 1 {
		id = fmt.Sprintf("%s.%d", agent, n)
	}
	l := &loop{agent: agent, id: id, role: s.roles[agent]}
	if l.role == "" {
		l.role = runtimeRole(agent)
	}
	for _, m := range first {
		if m.Role == llm.RoleUser {
			if rest, ok := strings.CutPrefix(m.Content, "Claim:\n"); ok {
				l.claim, _, _ = strings.Cut(rest, "\n\nEvidence:")
			}
			break
		}
	}
	parent := s.workflowCtx
	if t := s.startingTool(l); t != nil {
		parent = t.ctx
	} else if len(s.loops) > 0 && agent != s.loops[0].agent {
		parent = s.loops[0].ctx
	}
	if parent == nil {
		parent = context.Background()
	}
	attrs := []attribute.KeyValue{attribute.String(opName, "invoke_agent"), attribute.String(agentName, l.role), attribute.String(agentID, id),
		attribute.String(conversation, s.runID+"/"+id), attribute.String(providerName, provider(s.model.Provider))}
	if s.model.Name != "" {
		attrs = append(attrs, attribute.String(requestModel, s.model.Name))
	}
	attrs = append(attrs, s.serverAttrs()...)
	l.ctx, l.span = s.tracer.Start(parent, spanName("invoke_agent", l.role), trace.WithTimestamp(at), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	l.last = at
	s.loops = append(s.loops, l)
	s.byAgent[agent] = append(s.byAgent[agent], l)
	return l
}

// startingTool is the open call that started l: a dispatch names its
// assignment; a verifier's prompt states its verify call's claim; else the
// finish (or report) whose gate ran an effort wave or the writer.
func (s *spans) startingTool(l *loop) *toolSpan {
	if call, ok := s.assign[l.agent]; ok && s.seen[l.agent] == 1 {
		key := s.parent[l.agent] + "\x00" + call
		if t := s.tools[key]; t != nil {
			return t
		}
		return s.ended[key]
	}
	var finish, verify *toolSpan
	for _, t := range s.tools {
		switch t.name {
		case "verify":
			if s.taken[t] {
				continue
			}
			var a struct {
				Claim string `json:"claim"`
			}
			json.Unmarshal([]byte(t.args), &a)
			if l.claim != "" && a.Claim == l.claim {
				s.taken[t] = true
				return t
			}
			if verify == nil || t.start.Before(verify.start) {
				verify = t
			}
		case "finish", "report":
			finish = t
		}
	}
	if finish != nil {
		return finish
	}
	if verify != nil && l.claim != "" {
		s.taken[verify] = true
		return verify
	}
	return nil
}

func (s *spans) response(ctx context.Context, e record.Event, mr *record.ModelResponse) {
	l := s.byReq[mr.Request]
	if l == nil || mr.Request == 0 {
		if mr.Purpose == record.PurposeSummary {
			l = s.latest(e.Agent, e.Time)
		} else {
			l = s.pendingLoop(e.Agent)
		}
	}
	if mr.Purpose != record.PurposeSummary {
		l.pending = 0
		s.byResp[e.Seq] = l
	}
	reply := s.message(mr.Message)
	for _, tc := range reply.ToolCalls {
		s.byCall[e.Agent+"\x00"+tc.ID] = l
	}
	model := s.model.Name
	if model == "" {
		model = mr.Model
	}
	u := mr.Usage
	attrs := append(s.chatAttrs(l), attribute.Int(inputTokens, u.PromptTokens), attribute.Int(outputTokens, u.CompletionTokens),
		attribute.Int("apodex.turn", mr.Turn), attribute.Int64("apodex.seq", e.Seq))
	if u.CachedTokens > 0 {
		attrs = append(attrs, attribute.Int(cacheRead, u.CachedTokens))
	}
	if u.CacheCreationTokens > 0 {
		attrs = append(attrs, attribute.Int(cacheCreation, u.CacheCreationTokens))
	}
	if u.ReasoningTokens > 0 {
		attrs = append(attrs, attribute.Int(reasoningOut, u.ReasoningTokens))
	}
	if mr.Model != "" {
		attrs = append(attrs, attribute.String(responseMod, mr.Model))
	}
	if mr.ResponseID != "" {
		attrs = append(attrs, attribute.String(responseID, mr.ResponseID))
	}
	if mr.FinishReason != "" {
		attrs = append(attrs, attribute.StringSlice(finishReason, []string{mr.FinishReason}))
	}
	if mr.Purpose != "" {
		attrs = append(attrs, attribute.String("apodex.purpose", mr.Purpose))
	}
	if s.capture {
		if mr.Purpose != record.PurposeSummary {
			attrs = append(attrs, inputAttrs(l.hist)...)
			l.hist = append(l.hist, reply)
		}
		attrs = append(attrs, attribute.String(outputMsgs, outputJSON(reply, mr.FinishReason)))
	}
	start := e.Time.Add(-time.Duration(mr.DurationMS) * time.Millisecond)
	s.child(l, spanName("chat", model), trace.SpanKindClient, start, e.Time, attrs, "")
	s.record(ctx, u.PromptTokens, u.CompletionTokens, float64(mr.DurationMS)/1000, mr.Model, "")
	l.last = e.Time
}

func (s *spans) toolResult(e record.Event, tr *record.ToolResult) {
	key := e.Agent + "\x00" + tr.CallID
	t := s.tools[key]
	delete(s.tools, key)
	delete(s.taken, t)
	l := s.byCall[key]
	if l == nil {
		l = s.latest(e.Agent, e.Time)
	}
	l.last = e.Time
	if t == nil { // its tool_call was before the events followed
		start := e.Time.Add(-time.Duration(tr.DurationMS) * time.Millisecond)
		ctx, span := s.tracer.Start(l.ctx, spanName("execute_tool", tr.Name), trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
		t = &toolSpan{ctx: ctx, span: span, name: tr.Name}
	}
	attrs := []attribute.KeyValue{attribute.String(opName, "execute_tool"), attribute.String(toolName, tr.Name), attribute.String(toolCallID, tr.CallID),
		attribute.String(toolType, "function"), attribute.String(agentName, l.role), attribute.String(conversation, s.runID+"/"+l.id), attribute.Int64("apodex.seq", e.Seq)}
	if s.capture {
		attrs = append(attrs, attribute.String(toolArgs, t.args), attribute.String(toolResult, tr.Output))
	}
	if tr.IsError {
		attrs = append(attrs, attribute.String(errorType, "tool_error"))
		t.span.SetStatus(codes.Error, firstLine(tr.Output))
	}
	t.span.SetAttributes(attrs...)
	t.span.End(trace.WithTimestamp(e.Time))
	if tr.Name == "dispatch" {
		s.ended[key] = t
	}
}

// verdict is a gen_ai.evaluation.result event on the verifier's span.
func (s *spans) verdict(v record.Verdict, e record.Event) {
	var target *loop
	for _, l := range s.byAgent[e.Agent] {
		if l.claim == v.Claim {
			target = l
		}
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.evaluation.name", "apodex.verdict"), attribute.String("gen_ai.evaluation.score.label", v.Verdict)}
	if v.Reason != "" {
		attrs = append(attrs, attribute.String("gen_ai.evaluation.explanation", v.Reason))
	}
	if v.ClaimID != "" {
		attrs = append(attrs, attribute.String("apodex.claim_id", v.ClaimID))
	}
	opt := []trace.EventOption{trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...)}
	switch {
	case target != nil:
		target.span.AddEvent("gen_ai.evaluation.result", opt...)
	case len(s.loops) > 0:
		s.loops[0].span.AddEvent("gen_ai.evaluation.result", opt...)
	}
}

// pendingLoop is the agent's loop waiting for a reply (the latest loop if
// none is).
func (s *spans) pendingLoop(agent string) *loop {
	ls := s.byAgent[agent]
	for _, l := range ls {
		if l.pending != 0 {
			return l
		}
	}
	return s.latest(agent, time.Time{})
}

// latest is the agent's newest loop, started when none is known.
func (s *spans) latest(agent string, at time.Time) *loop {
	if ls := s.byAgent[agent]; len(ls) > 0 {
		return ls[len(ls)-1]
	}
	return s.startLoop(agent, at, nil)
}

// child records one finished operation under its agent's span.
func (s *spans) child(l *loop, name string, kind trace.SpanKind, start, end time.Time, attrs []attribute.KeyValue, errMsg string) {
	_, span := s.tracer.Start(l.ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if errMsg != "" {
		span.SetStatus(codes.Error, firstLine(errMsg))
	}
	span.End(trace.WithTimestamp(end))
	if end.After(l.last) {
		l.last = end
	}
}

// close ends open tool spans, every agent span at its last event (the
// latest first), then the workflow span.
func (s *spans) close() {
	for k, t := range s.tools {
		t.span.End(trace.WithTimestamp(t.start))
		delete(s.tools, k)
	}
	for i := len(s.loops) - 1; i >= 0; i-- {
		l := s.loops[i]
		l.span.End(trace.WithTimestamp(l.last))
	}
	s.loops, s.byAgent = nil, map[string][]*loop{}
	if s.workflow != nil {
		s.workflow.End(trace.WithTimestamp(s.workflowLast))
		s.workflow = nil
	}
}

// message decodes a recorded message, its body from a blob if moved.
func (s *spans) message(raw json.RawMessage) llm.Message {
	var m struct {
		llm.Message
		ContentRef string `json:"content_ref"`
	}
	json.Unmarshal(raw, &m)
	if m.ContentRef != "" && s.capture {
		if b, err := record.ReadBlob(s.dir, m.ContentRef); err == nil {
			m.Message.Content = string(b)
		}
	}
	return m.Message
}
