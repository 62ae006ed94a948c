package llmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// DefaultUsage is what a Turn without Usage reports.
var DefaultUsage = llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}

// Turn is one answer of a fake server.
type Turn struct {
	// Content is the assistant's text; Calls its tool calls (arguments are
	// sent verbatim, malformed or not; an empty ID becomes "call_<n>_<i>"
	// from the OpenAI fake, "toolu_<n>_<i>" from the Anthropic one).
	Content string
	Calls   []llm.ToolCall
	// Usage is the usage reported; nil reports DefaultUsage.
	Usage *llm.Usage
	// Status is the HTTP status; 0 means 200. A non-2xx status answers an
	// error object instead of a reply.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Body, when set, is written verbatim instead of the generated body.
	Body string
	// Hang answers nothing until the request's context ends (or the test).
	Hang bool
}

// Request is one request body as the server decoded it, in the same shape
// whichever API it came in.
type Request struct {
	Model        string
	Messages     []Message
	Tools        []Tool
	Stream       bool
	IncludeUsage bool // OpenAI's stream_options.include_usage
	MaxTokens    int  // max_tokens; 0 when not sent
	// Header is the request's HTTP header (Authorization, Accept, …).
	Header http.Header
	// Raw is the whole body.
	Raw []byte
}

// Message is one message of a request.
type Message struct {
	Role       string
	Content    string // text; an array of text parts is joined
	ToolCalls  []llm.ToolCall
	ToolCallID string
	Name       string
}

// Tool is one function tool offered in a request.
type Tool struct {
	Type        string // OpenAI's "function"; Anthropic's type as sent, often ""
	Name        string
	Description string
	Parameters  json.RawMessage // Anthropic's input_schema
}

// dialect is what differs between the fake APIs.
type dialect struct {
	name   string // "OpenAI", "Anthropic": in failure messages
	path   string // the one POST path answered
	check  func(body []byte) *strict.Violation
	decode func(body []byte) (Request, error)
	// errorBody is the error object for a turn with a non-2xx status.
	errorBody func(n, status int) []byte
	whole     func(w io.Writer, n int, req Request, turn Turn)
	stream    func(w io.Writer, flush func(), n int, req Request, turn Turn)
	// other answers requests besides path (GET /v1/models); false when it
	// does not know the request.
	other func(s *Server, w http.ResponseWriter, r *http.Request) bool
}

// Server is a running fake endpoint.
type Server struct {
	// URL is the base URL to give a client: ending in /v1 for the OpenAI
	// fake, the bare root for the Anthropic one (as their real base URLs).
	URL string

	t      testing.TB
	api    *dialect
	policy func(n int, req Request) Turn
	done   chan struct{} // closed when the test ends: releases hanging turns

	mu         sync.Mutex
	lenient    bool
	reqs       []Request
	violations []strict.Violation
	models     []string
}

func newServer(t testing.TB, api *dialect, suffix string, policy func(n int, req Request) Turn) *Server {
	t.Helper()
	s := &Server{t: t, api: api, policy: policy, done: make(chan struct{})}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = hs.URL + suffix
	t.Cleanup(func() {
		close(s.done)
		hs.Close()
	})
	return s
}

// Lenient turns the request checks off, for the rare test that sends a
// broken body on purpose, and returns s.
func (s *Server) Lenient() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lenient = true
	return s
}

// Violations returns the broken requests refused so far, in arrival order.
func (s *Server) Violations() []strict.Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]strict.Violation(nil), s.violations...)
}

// Requests returns the bodies answered so far, in arrival order; refused
// ones are in Violations instead.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Script returns a policy that plays turns in order, one per request (a 429
// turn and its retry take one each); past the end it calls finish.
func Script(turns ...Turn) func(n int, req Request) Turn {
	return func(n int, _ Request) Turn {
		if n < len(turns) {
			return turns[n]
		}
		return Turn{Calls: []llm.ToolCall{{Name: "finish", Arguments: `{"summary":"the script is over"}`}}}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.api.other != nil && s.api.other(s, w, r) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != s.api.path {
		s.t.Errorf("llmtest: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("llmtest: reading request body: %v", err)
		return
	}
	s.mu.Lock()
	lenient := s.lenient
	s.mu.Unlock()
	if !lenient {
		if v := s.api.check(raw); v != nil {
			s.refuse(w, raw, v)
			return
		}
	}
	req, err := s.api.decode(raw)
	if err != nil {
		if !lenient {
			s.t.Errorf("llmtest: request body is not a %s request: %v\n%s", s.api.name, err, raw)
		}
		writeBody(w, http.StatusBadRequest, false, s.api.errorBody(-1, http.StatusBadRequest))
		return
	}
	req.Header = r.Header.Clone()
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, req)
	turn := s.policy(n, req)
	s.mu.Unlock()

	if turn.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if turn.RetryAfter != "" {
		w.Header().Set("Retry-After", turn.RetryAfter)
	}
	status := turn.Status
	if status == 0 {
		status = http.StatusOK
	}
	ok := status >= 200 && status <= 299
	switch {
	case turn.Body != "":
		writeBody(w, status, req.Stream && ok, []byte(turn.Body))
	case !ok:
		writeBody(w, status, false, s.api.errorBody(n, status))
	case req.Stream:
		writeBody(w, status, true, nil)
		flush := func() {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		s.api.stream(w, flush, n, req, turn)
	default:
		writeBody(w, status, false, nil)
		s.api.whole(w, n, req, turn)
	}
}

// refuse answers a broken request as the real API would and fails the test.
func (s *Server) refuse(w http.ResponseWriter, raw []byte, v *strict.Violation) {
	s.mu.Lock()
	s.violations = append(s.violations, *v)
	s.mu.Unlock()
	s.t.Errorf("llmtest: strict %s fake refuses a request: %v\n(the real API answers %d; the test or the runtime sent a history it would reject)%s",
		s.api.name, v, v.Status, outline(raw, v.Index))
	writeBody(w, v.Status, false, v.Body)
}

// writeBody writes the header for a JSON or SSE answer, then body.
func writeBody(w http.ResponseWriter, status int, stream bool, body []byte) {
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	w.Write(body)
}

// outline sums up the messages around index at, one line each, so a
// failure shows the history that broke a rule without the whole body.
func outline(raw []byte, at int) string {
	var req struct {
		Messages []struct {
			Role       any             `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID any             `json:"tool_call_id"`
			ToolCalls  []struct {
				ID any `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if at < 0 || json.Unmarshal(raw, &req) != nil || at >= len(req.Messages) {
		return ""
	}
	var b strings.Builder
	for i := max(0, at-6); i < min(len(req.Messages), at+3); i++ {
		m := req.Messages[i]
		mark := " "
		if i == at {
			mark = ">"
		}
		fmt.Fprintf(&b, "\n %s messages[%d] %v", mark, i, m.Role)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call:%v", c.ID)
		}
		if m.ToolCallID != nil {
			fmt.Fprintf(&b, " answers:%v", m.ToolCallID)
		}
		var blocks []struct {
			Type      any    `json:"type"`
			ID        any    `json:"id"`
			ToolUseID any    `json:"tool_use_id"`
			Text      string `json:"text"`
		}
		var text string
		switch {
		case json.Unmarshal(m.Content, &text) == nil:
			fmt.Fprintf(&b, " %q", cutText(text, 40))
		case json.Unmarshal(m.Content, &blocks) == nil:
			for _, bl := range blocks {
				switch {
				case bl.ID != nil:
					fmt.Fprintf(&b, " [%v %v]", bl.Type, bl.ID)
				case bl.ToolUseID != nil:
					fmt.Fprintf(&b, " [%v %v]", bl.Type, bl.ToolUseID)
				default:
					fmt.Fprintf(&b, " [%v %q]", bl.Type, cutText(bl.Text, 20))
				}
			}
		default:
			fmt.Fprintf(&b, " content:%s", cutText(string(m.Content), 20))
		}
	}
	return b.String()
}

// isTypeError reports a JSON value of the wrong type for its field. The
// decoders take such a body as far as it goes: the checks refuse wrong
// types, and a key sent twice (the last one counts, as with the real
// APIs) would otherwise fail the decoding after passing them.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// split cuts s into at most k non-empty pieces on rune boundaries.
func split(s string, k int) []string {
	r := []rune(s)
	var out []string
	for i := 0; i < k; i++ {
		lo, hi := len(r)*i/k, len(r)*(i+1)/k
		if hi > lo {
			out = append(out, string(r[lo:hi]))
		}
	}
	return out
}

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of plain values are written
	}
	w.Write(b)
	io.WriteString(w, "\n")
}

func usageOf(turn Turn) llm.Usage {
	if turn.Usage != nil {
		return *turn.Usage
	}
	return DefaultUsage
}

// cutText shortens s for a message.
func cutText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
