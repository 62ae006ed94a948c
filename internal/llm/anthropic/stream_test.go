package anthropic

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/apodex/apodex/internal/llm"
)

func TestReadEvents(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{name: "two events", in: "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n",
			want: []sseEvent{{"a", "1"}, {"b", "2"}}},
		{name: "multi-line data, no space after colon", in: "event:a\ndata:x\ndata: y\n\n",
			want: []sseEvent{{"a", "x\ny"}}},
		{name: "CRLF and comments", in: ": keep-alive\r\nevent: a\r\ndata: 1\r\n\r\n",
			want: []sseEvent{{"a", "1"}}},
		{name: "event without data is not dispatched", in: "event: a\n\ndata: 2\n\n",
			want: []sseEvent{{"", "2"}}},
		{name: "unknown fields ignored", in: "id: 4\nretry: 10\ndata: 1\n\n",
			want: []sseEvent{{"", "1"}}},
		{name: "complete last line without blank line", in: "data: 1\n\ndata: 2\n",
			want: []sseEvent{{"", "1"}, {"", "2"}}},
		{name: "cut last line is dropped", in: "data: 1\n\ndata: 2",
			want: []sseEvent{{"", "1"}}},
		{name: "empty", in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []sseEvent
			for ev, err := range readEvents(iotest.OneByteReader(strings.NewReader(tt.in))) {
				if err != nil {
					t.Fatalf("readEvents: %v", err)
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadEventsStopsEarly(t *testing.T) {
	n := 0
	for range readEvents(strings.NewReader("data: 1\n\ndata: 2\n\n")) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("yielded %d events after break", n)
	}
}

func TestStreamReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader(ev("message_start", msgStart)), iotest.ErrReader(boom))
	_, err := decodeStream(r, "u")
	if !errors.Is(err, llm.ErrTruncated) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrTruncated wrapping the read error", err)
	}
}

// FuzzDecodeStream: no input makes the stream decoder panic, and it returns
// exactly one of a response and an error.
func FuzzDecodeStream(f *testing.F) {
	f.Add(twoToolStream)
	f.Add(textStream)
	f.Add(textStream[:len(textStream)/2])
	f.Add(ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\"}}\r\n\r\ndata: {\"type\":\"message_stop\"}\n")
	f.Add(": ping\n\nevent:\ndata\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		resp, err := decodeStream(strings.NewReader(in), "u")
		if (resp == nil) == (err == nil) {
			t.Fatalf("resp = %v, err = %v: want exactly one", resp, err)
		}
		if resp != nil && resp.Message.Role != llm.RoleAssistant {
			t.Fatalf("role = %q", resp.Message.Role)
		}
	})
}

func TestStreamThatIsNotSSE(t *testing.T) {
	for name, body := range map[string]string{
		"html page":     "<html><body>502 Bad Gateway</body></html>\n",
		"data not json": "event: message_start\ndata: hello\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeStream(strings.NewReader(body), "http://x/v1/messages")
			var bad *llm.BadStreamError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), "not SSE/JSON") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
