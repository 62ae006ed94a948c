package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

// maxEvent bounds one SSE line and one event's data. Tool calls that write
// whole files arrive as single multi-megabyte chunks from some servers.
const maxEvent = 32 << 20

var doneMarker = []byte("[DONE]")

// parseStream reads a Chat Completions SSE stream to its end and assembles the
// assistant turn. url names the endpoint in errors.
//
// Each data line is dispatched as soon as it holds a whole JSON value, so
// servers that omit the blank line between events still parse; a JSON value
// split over several data lines (legal SSE) is joined until it is whole.
func parseStream(r io.Reader, url string) (*llm.Response, error) { return parseStreamTo(r, url, nil) }

// parseStreamTo is parseStream handing the text to onText (if not nil) as
// it arrives (llm.TextTo).
func parseStreamTo(r io.Reader, url string, onText func(string)) (*llm.Response, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), maxEvent) // grows to maxEvent for a long line
	a := assembler{url: url, byIndex: map[int]int{}, onText: onText}
	var pending []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // end of event
			if len(pending) > 0 {
				if err := a.dispatch(pending); err != nil {
					return nil, err
				}
				pending = pending[:0]
			}
			if a.done {
				return a.response()
			}
			continue
		}
		if line[0] == ':' { // comment / keep-alive
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		switch string(bytes.TrimSpace(field)) {
		case "data":
		case "event", "id", "retry":
			continue
		default:
			// Not a line of a server-sent-event stream: an HTML page, a
			// plain-text error, another API's format.
			return nil, llm.NewBadStream(url, line)
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(pending) > 0 {
			pending = append(pending, '\n')
		}
		pending = append(pending, value...)
		if len(pending) > maxEvent {
			return nil, fmt.Errorf("openai: %s sent an event over %d bytes: %w", url, maxEvent, llm.ErrMalformed)
		}
		if complete(pending) {
			if err := a.dispatch(pending); err != nil {
				return nil, err
			}
			pending = pending[:0]
		}
		if a.done {
			return a.response()
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("openai: %s sent a line over %d bytes: %w", url, maxEvent, llm.ErrMalformed)
		}
		return nil, fmt.Errorf("openai: reading stream from %s: %w: %w", url, llm.ErrTruncated, err)
	}
	// A leftover incomplete value means the server stopped mid-event; response
	// reports that as truncation unless a finish reason already arrived.
	return a.response()
}

// complete reports whether an event's data can be dispatched now.
func complete(p []byte) bool {
	t := bytes.TrimSpace(p)
	return len(t) == 0 || t[0] != '{' || json.Valid(t)
}

// assembler accumulates one assistant turn from stream chunks.
type assembler struct {
	url       string
	id        string
	content   strings.Builder
	reasoning strings.Builder
	calls     []llm.ToolCall
	byIndex   map[int]int // delta index -> position in calls
	last      int         // position of the call a delta without index continues
	finish    string
	model     string
	usage     llm.Usage
	choice    bool   // a choice for index 0 arrived
	done      bool   // [DONE] arrived
	junk      []byte // the first data that was not a JSON chunk
	onText    func(string)
}

func (a *assembler) dispatch(p []byte) error {
	p = bytes.TrimSpace(p)
	switch {
	case bytes.Equal(p, doneMarker):
		a.done = true
		return nil
	case len(p) == 0 || p[0] != '{':
		// Not a chunk: some proxies send pings as data. Kept to name it if
		// the stream never finishes.
		if a.junk == nil && len(p) > 0 {
			a.junk = append([]byte(nil), p[:min(len(p), 200)]...)
		}
		return nil
	}
	var ch chatResponse
	if err := json.Unmarshal(p, &ch); err != nil {
		return fmt.Errorf("openai: %s sent an unparsable chunk %s: %w", a.url, snippet(p), llm.ErrMalformed)
	}
	if present(ch.Error) {
		msg, code := errorObject(ch.Error, 200)
		return (&llm.APIError{StatusCode: code, URL: a.url, Message: cut("stream error: "+msg, 500), Code: errorCode([]byte(`{"error":` + string(ch.Error) + `}`))}).Classify("")
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.ID != "" {
		a.id = ch.ID
	}
	if ch.Usage != nil { // the final empty-choices chunk, or the last choice chunk
		a.usage = ch.Usage.toLLM()
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // n>1 is never requested
		}
		a.choice = true
		d := c.Delta
		if d == nil {
			d = c.Message
		}
		if d != nil {
			a.content.WriteString(string(d.Content))
			if a.onText != nil && c.Delta != nil {
				a.onText(string(d.Content))
			}
			if d.Content == "" {
				a.content.WriteString(string(d.Refusal))
			}
			a.reasoning.WriteString(d.reasoning())
			for _, tc := range d.ToolCalls {
				a.addToolDelta(tc)
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
		}
	}
	return nil
}

// addToolDelta merges one tool-call fragment. The first fragment for an index
// carries id and name, later ones pieces of arguments. A different id at a
// known index starts a new call: some servers put every call at index 0.
func (a *assembler) addToolDelta(d inToolCall) {
	pos := -1
	if d.Index != nil {
		if p, ok := a.byIndex[*d.Index]; ok {
			pos = p
		}
	} else if len(a.calls) > 0 {
		pos = a.last
	}
	if pos >= 0 && d.ID != "" && a.calls[pos].ID != "" && a.calls[pos].ID != d.ID {
		pos = -1
	}
	if pos < 0 {
		a.calls = append(a.calls, llm.ToolCall{})
		pos = len(a.calls) - 1
		if d.Index != nil {
			a.byIndex[*d.Index] = pos
		}
	}
	a.last = pos
	c := &a.calls[pos]
	if c.ID == "" {
		c.ID = d.ID
	}
	// Names normally come whole in the first fragment; a repeat is ignored,
	// a different piece is appended.
	if name := d.Function.Name; name != "" && name != c.Name {
		c.Name += name
	}
	c.Arguments += string(d.Function.Arguments)
}

// response finishes the turn, or reports why the stream is not a whole turn.
func (a *assembler) response() (*llm.Response, error) {
	if !a.done && a.finish == "" && a.junk != nil && !a.choice {
		return nil, llm.NewBadStream(a.url, a.junk)
	}
	if !a.done && a.finish == "" {
		return nil, fmt.Errorf("openai: %s closed the stream before it finished: %w", a.url, llm.ErrTruncated)
	}
	if !a.choice {
		return nil, fmt.Errorf("openai: %s streamed no choices: %w", a.url, llm.ErrEmpty)
	}
	r := finishTurn(a.content.String(), a.calls, a.finish, a.model, a.usage)
	r.ID, r.Message.Reasoning = a.id, a.reasoning.String()
	return r, nil
}

// finishTurn builds the Response; calls without an id get "call_<position>".
func finishTurn(content string, calls []llm.ToolCall, finish, model string, usage llm.Usage) *llm.Response {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = "call_" + strconv.Itoa(i)
		}
	}
	return &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: content, ToolCalls: calls},
		Usage:        usage,
		FinishReason: normalizeFinish(finish),
		Model:        model,
	}
}

// parseResponse reads a whole (non-streaming) Chat Completions reply.
func parseResponse(body []byte, url string, status int) (*llm.Response, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("openai: %s sent an empty body: %w", url, llm.ErrEmpty)
	}
	var cr chatResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, fmt.Errorf("openai: %s sent unparsable JSON %s: %w", url, snippet(body), llm.ErrMalformed)
	}
	if present(cr.Error) {
		msg, code := errorObject(cr.Error, status)
		return nil, (&llm.APIError{StatusCode: code, URL: url, Message: cut(msg, 500), Code: errorCode(body)}).Classify("")
	}
	var ch *wireChoice
	for i := range cr.Choices {
		if cr.Choices[i].Index == 0 {
			ch = &cr.Choices[i]
			break
		}
	}
	if ch == nil || (ch.Message == nil && ch.Delta == nil) {
		return nil, fmt.Errorf("openai: %s returned no choices: %w", url, llm.ErrEmpty)
	}
	m := ch.Message
	if m == nil {
		m = ch.Delta
	}
	content := string(m.Content)
	if content == "" {
		content = string(m.Refusal)
	}
	var calls []llm.ToolCall
	for _, tc := range m.ToolCalls {
		calls = append(calls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
	}
	var usage llm.Usage
	if cr.Usage != nil {
		usage = cr.Usage.toLLM()
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	r := finishTurn(content, calls, finish, cr.Model, usage)
	r.ID, r.Message.Reasoning = cr.ID, m.reasoning()
	return r, nil
}
