package anthropic

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
)

func TestEndpoint(t *testing.T) {
	tests := []struct{ base, want string }{
		{"", "https://api.anthropic.com/v1/messages"},
		{"https://api.anthropic.com", "https://api.anthropic.com/v1/messages"},
		{"https://api.anthropic.com/", "https://api.anthropic.com/v1/messages"},
		{"http://proxy:8080/v1", "http://proxy:8080/v1/messages"},
		{"http://proxy:8080/v1/", "http://proxy:8080/v1/messages"},
		{"http://proxy:8080/anthropic", "http://proxy:8080/anthropic/v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			if got := endpoint(tt.base); got != tt.want {
				t.Errorf("endpoint(%q) = %q, want %q", tt.base, got, tt.want)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	long := strings.Repeat("é", 400) // 800 bytes of two-byte runes
	tests := []struct {
		name       string
		rp         reply
		wantMsg    string
		retryAfter time.Duration
		retryable  bool
	}{
		{name: "429 with Retry-After seconds", rp: reply{status: 429, header: map[string]string{"Retry-After": "7"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`},
			wantMsg: "Number of requests has exceeded your rate limit", retryAfter: 7 * time.Second, retryable: true},
		{name: "429 with Retry-After date", rp: reply{status: 429, header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
			wantMsg: "slow down", retryAfter: 90 * time.Second, retryable: true},
		{name: "529 overloaded", rp: reply{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			wantMsg: "Overloaded", retryable: true},
		{name: "401", rp: reply{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			wantMsg: "invalid x-api-key"},
		{name: "key echoed back is redacted", rp: reply{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"bad key ` + testKey + `"}}`},
			wantMsg: "bad key [redacted]"},
		{name: "plain text body", rp: reply{status: 502, header: map[string]string{"content-type": "text/plain"}, body: "bad gateway\n"},
			wantMsg: "bad gateway", retryable: true},
		{name: "empty body", rp: reply{status: 404}, wantMsg: "Not Found"},
		{name: "long body is cut on a rune boundary", rp: reply{status: 400, header: map[string]string{"content-type": "text/plain"}, body: long},
			wantMsg: strings.Repeat("é", 250) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fakeServer(t, tt.rp)
			c := New(Config{BaseURL: srv.URL, APIKey: testKey, Model: "m"})
			c.now = func() time.Time { return now }
			_, err := c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var api *llm.APIError
			if !errors.As(err, &api) {
				t.Fatalf("err = %v, want *llm.APIError", err)
			}
			if api.StatusCode != tt.rp.status || api.URL != srv.URL+"/v1/messages" {
				t.Errorf("status, URL = %d, %q", api.StatusCode, api.URL)
			}
			if api.Message != tt.wantMsg {
				t.Errorf("Message = %q, want %q", api.Message, tt.wantMsg)
			}
			if api.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", api.RetryAfter, tt.retryAfter)
			}
			if got := llm.IsRetryable(err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"1.5", 1500 * time.Millisecond}, {"NaN", 0}, {"1e300", maxRetryAfter},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0}, {"soon", 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	c := New(Config{BaseURL: base, APIKey: testKey, Model: "m"})
	_, err = c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var conn *llm.ConnError
	if !errors.As(err, &conn) {
		t.Fatalf("err = %v, want *llm.ConnError", err)
	}
	if conn.URL != base+"/v1/messages" || !llm.IsRetryable(err) {
		t.Errorf("ConnError URL = %q, retryable = %v", conn.URL, llm.IsRetryable(err))
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error leaks the API key: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		// prefix is written and flushed before the server blocks.
		prefix string
	}{
		{name: "before the answer"},
		{name: "mid-stream", stream: true, prefix: ev("message_start", msgStart)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.prefix != "" {
					w.Header().Set("content-type", "text/event-stream")
					w.Write([]byte(tt.prefix))
					w.(http.Flusher).Flush()
				}
				close(started)
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)

			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-started
				cancel()
			}()
			c := New(Config{BaseURL: srv.URL, Model: "m", Stream: tt.stream})
			_, err := c.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			var conn *llm.ConnError
			if errors.As(err, &conn) {
				t.Errorf("cancellation reported as ConnError: %v", err)
			}
			if llm.IsRetryable(err) {
				t.Errorf("cancellation must not be retryable: %v", err)
			}
		})
	}
}

// "prompt is too long" is an overflow the runtime can act on.
func TestPromptTooLongIsOverflow(t *testing.T) {
	srv, _ := fakeServer(t, reply{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`})
	_, err := New(Config{BaseURL: srv.URL, Model: "m"}).Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	o, over := llm.IsContextOverflow(err)
	if !over || o.Limit != 200000 || o.Prompt != 210000 {
		t.Fatalf("err = %v, overflow %v %+v", err, over, o)
	}
}
