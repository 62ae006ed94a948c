package web_test

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/web"
)

// BenchmarkStreamLatency is the time from an append to the record until
// the SSE client has read the event: what the page's "live" costs.
func BenchmarkStreamLatency(b *testing.B) {
	home := b.TempDir()
	dir := filepath.Join(home, "runs", "bench")
	l, err := record.Create(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.Append(record.TypeRunStarted, "", map[string]any{"objective": "o"})
	srv := serve(b, web.Config{Home: home})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/runs/bench/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := func() {
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: record") {
				return
			}
		}
		b.Fatal("stream ended")
	}
	next() // run_started
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append("note", "lead", map[string]any{"i": i}); err != nil {
			b.Fatal(err)
		}
		next()
	}
}
