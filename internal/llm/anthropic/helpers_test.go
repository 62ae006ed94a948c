package anthropic

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

const testKey = "sk-ant-test-secret-key"

// reply is what the fake server answers.
type reply struct {
	lenient bool // the request is odd on purpose: not checked
	status  int
	header  map[string]string
	body    string
}

// captured is what the fake server received, one entry per request.
type captured struct {
	mu     sync.Mutex
	header []http.Header
	bodies [][]byte
	paths  []string
}

func (c *captured) last(t *testing.T) (http.Header, []byte, string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("server received no request")
	}
	n := len(c.bodies) - 1
	return c.header[n], c.bodies[n], c.paths[n]
}

// fakeServer answers every request with rp and records what it got.
func fakeServer(t *testing.T, rp reply) (*httptest.Server, *captured) {
	t.Helper()
	rec := &captured{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Every body the client sends must be one the real API accepts,
		// unless the test sends a deliberately odd request (rp.lenient).
		if v := strict.CheckAnthropic(body); v != nil && !rp.lenient {
			t.Errorf("the client sent a request the Messages API refuses: %v\n%s", v, body)
		}
		rec.mu.Lock()
		rec.header = append(rec.header, r.Header.Clone())
		rec.bodies = append(rec.bodies, body)
		rec.paths = append(rec.paths, r.URL.Path)
		rec.mu.Unlock()
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("content-type") == "" {
			if strings.HasPrefix(rp.body, "event:") || strings.HasPrefix(rp.body, "data:") {
				w.Header().Set("content-type", "text/event-stream")
			} else {
				w.Header().Set("content-type", "application/json")
			}
		}
		status := rp.status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// ev renders one SSE event.
func ev(name, data string) string {
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// jsonEqual fails unless got and want hold the same JSON value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("JSON differs\ngot:\n%s\nwant:\n%s", gi, wi)
	}
}
