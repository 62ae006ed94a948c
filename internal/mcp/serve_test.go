package mcp

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/mcp/mcptest"
	"github.com/apodex/apodex/internal/tool"
)

// Apodex's tools served over streamable HTTP: a token is required, the
// tools keep their names, descriptions and results (isError included),
// and progress reaches a client that asked for it.
func TestServeHTTP(t *testing.T) {
	type countArgs struct {
		To int `json:"to" desc:"how far"`
	}
	count := tool.Define("count", "Count, reporting progress.", 0, func(ctx context.Context, a countArgs) tool.Result {
		if a.To < 0 {
			return tool.Errorf("cannot count to %d", a.To)
		}
		for i := 1; i <= a.To; i++ {
			Progress(ctx, fmt.Sprintf("at %d", i), float64(i), float64(a.To))
		}
		return tool.Result{Output: fmt.Sprintf("counted to %d", a.To)}
	})
	srv := httptest.NewServer(Handler("apodex", "0.1.0", []tool.Tool{count}, "s3cret"))
	t.Cleanup(srv.Close)

	if _, err := mcptest.DialHTTP(t, srv.URL, "wrong"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a wrong token: %v", err)
	}
	c, err := mcptest.DialHTTP(t, srv.URL, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tools, err := c.Tools(ctx)
	if err != nil || tools["count"] != "Count, reporting progress." {
		t.Fatalf("tools %v %v", tools, err)
	}
	var mu sync.Mutex
	var seen []string
	text, isErr, err := c.Call(ctx, "count", map[string]any{"to": 3}, func(m string) { mu.Lock(); seen = append(seen, m); mu.Unlock() })
	if err != nil || isErr || text != "counted to 3" {
		t.Fatalf("count: %q %v %v", text, isErr, err)
	}
	got := func() string { // in any order: the client handles each on its own goroutine
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(slices.Sorted(slices.Values(seen)), ",")
	}
	for i := 0; i < 100 && got() != "at 1,at 2,at 3"; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got() != "at 1,at 2,at 3" {
		t.Errorf("progress %v", got())
	}
	text, isErr, _ = c.Call(ctx, "count", map[string]any{"to": -1}, nil)
	if !isErr || !strings.Contains(text, "cannot count to -1") {
		t.Errorf("an error result: %q %v", text, isErr)
	}
	text, isErr, _ = c.Call(ctx, "count", map[string]any{"too": 1}, nil)
	if !isErr || !strings.Contains(text, `unknown argument "too"`) {
		t.Errorf("bad arguments: %q %v", text, isErr)
	}
}
