package anthropic

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

// sseEvent is one server-sent event: its "event:" name and its "data:"
// lines joined by newlines.
type sseEvent struct {
	Name string
	Data string
}

// readEvents yields the events of a server-sent-event stream in order. An
// event is dispatched at a blank line, or at the end of the stream if its
// last line was complete; a final line cut off mid-way is dropped together
// with its event. Comment lines (":") and unknown fields are ignored.
func readEvents(r io.Reader) iter.Seq2[sseEvent, error] {
	return func(yield func(sseEvent, error) bool) {
		br := bufio.NewReader(r)
		var name string
		var data strings.Builder
		hasData := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					yield(sseEvent{}, err)
					return
				}
				if line == "" && hasData {
					yield(sseEvent{Name: name, Data: data.String()}, nil)
				}
				return
			}
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			if line == "" {
				if hasData && !yield(sseEvent{Name: name, Data: data.String()}, nil) {
					return
				}
				name, hasData = "", false
				data.Reset()
				continue
			}
			if line[0] == ':' {
				continue // a comment
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "data":
				if hasData {
					data.WriteByte('\n')
				}
				data.WriteString(value)
				hasData = true
			case "id", "retry":
			default:
				// Not a line of a server-sent-event stream: an HTML page,
				// a plain-text error, another API's format.
				yield(sseEvent{}, errNotSSE{line})
				return
			}
		}
	}
}

// errNotSSE is a line that no server-sent-event stream has.
type errNotSSE struct{ line string }

func (e errNotSSE) Error() string { return "not a server-sent-event line: " + e.line }

// streamEvent is the data of any Messages stream event.
type streamEvent struct {
	Type         string         `json:"type"`
	Message      *wireResponse  `json:"message"`       // message_start
	Index        int            `json:"index"`         // content_block_*
	ContentBlock *wireContent   `json:"content_block"` // content_block_start
	Delta        *streamDelta   `json:"delta"`         // content_block_delta, message_delta
	Usage        *wireUsage     `json:"usage"`         // message_delta
	Error        *wireErrorBody `json:"error"`         // error
}

type streamDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// partBlock is a content block still being streamed.
type partBlock struct {
	typ, id, name   string
	startInput      string
	signature, data string
	text, input     strings.Builder
}

// streamState folds stream events into a response.
type streamState struct {
	url    string
	id     string
	model  string
	stop   string
	usage  usage
	blocks map[int]*partBlock
	onText func(string) // nil: no one watches the text arrive
}

// decodeStream reads a streamed reply from endpoint url.
func decodeStream(r io.Reader, url string) (*llm.Response, error) { return decodeStreamTo(r, url, nil) }

// decodeStreamTo is decodeStream handing the text to onText (if not nil)
// as it arrives (llm.TextTo).
func decodeStreamTo(r io.Reader, url string, onText func(string)) (*llm.Response, error) {
	st := &streamState{url: url, blocks: map[int]*partBlock{}, onText: onText}
	n := 0
	for ev, err := range readEvents(r) {
		if ns, ok := err.(errNotSSE); ok {
			return nil, llm.NewBadStream(url, []byte(ns.line))
		}
		if err != nil {
			return nil, fmt.Errorf("anthropic: read stream after %d events: %w: %w", n, llm.ErrTruncated, err)
		}
		n++
		done, err := st.apply(ev)
		if err != nil {
			return nil, err
		}
		if done {
			return st.response()
		}
	}
	return nil, fmt.Errorf("anthropic: stream ended without message_stop after %d events: %w", n, llm.ErrTruncated)
}

// apply folds one event in; done is true at message_stop.
func (st *streamState) apply(ev sseEvent) (done bool, err error) {
	var e streamEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		if d := strings.TrimSpace(ev.Data); d == "" || d[0] != '{' {
			return false, llm.NewBadStream(st.url, []byte(ev.Data))
		}
		return false, fmt.Errorf("anthropic: decode stream event %q: %w: %v", ev.Name, llm.ErrMalformed, err)
	}
	if e.Type == "" {
		e.Type = ev.Name
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			st.id, st.model = e.Message.ID, e.Message.Model
			st.usage.merge(e.Message.Usage)
		}
	case "content_block_start":
		if e.ContentBlock == nil {
			return false, st.malformed("content_block_start without content_block")
		}
		if _, dup := st.blocks[e.Index]; dup {
			return false, st.malformed(fmt.Sprintf("content block %d started twice", e.Index))
		}
		cb := e.ContentBlock
		b := &partBlock{typ: cb.Type, id: cb.ID, name: cb.Name, startInput: string(cb.Input), signature: cb.Signature, data: cb.Data}
		b.text.WriteString(cb.Text)
		b.text.WriteString(cb.Thinking)
		st.blocks[e.Index] = b
	case "content_block_delta":
		b := st.blocks[e.Index]
		if b == nil || e.Delta == nil {
			return false, st.malformed(fmt.Sprintf("delta for content block %d that was not started", e.Index))
		}
		switch e.Delta.Type {
		case "text_delta":
			b.text.WriteString(e.Delta.Text)
			if st.onText != nil && b.typ == "text" {
				st.onText(e.Delta.Text)
			}
		case "input_json_delta":
			b.input.WriteString(e.Delta.PartialJSON)
		case "thinking_delta":
			b.text.WriteString(e.Delta.Thinking)
		case "signature_delta":
			b.signature += e.Delta.Signature
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			st.stop = e.Delta.StopReason
		}
		st.usage.merge(e.Usage)
	case "message_stop":
		return true, nil
	case "error":
		if e.Error == nil {
			e.Error = &wireErrorBody{Type: "api_error", Message: "error event without details"}
		}
		return false, replyError(st.url, e.Error)
	}
	// content_block_stop, ping and event types added later need nothing.
	return false, nil
}

func (st *streamState) malformed(what string) error {
	return fmt.Errorf("anthropic: stream: %s: %w", what, llm.ErrMalformed)
}

// response assembles the finished blocks in index order.
func (st *streamState) response() (*llm.Response, error) {
	blocks := make([]block, 0, len(st.blocks))
	for _, i := range slices.Sorted(maps.Keys(st.blocks)) {
		b := st.blocks[i]
		input := b.input.String()
		if strings.TrimSpace(input) == "" {
			// No input deltas: the start block's input, normally {}.
			input = b.startInput
		}
		blocks = append(blocks, block{typ: b.typ, text: b.text.String(), id: b.id, name: b.name, input: input, signature: b.signature, data: b.data})
	}
	return assemble(st.id, st.model, st.stop, blocks, st.usage)
}
