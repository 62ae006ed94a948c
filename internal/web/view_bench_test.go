package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// writeRun writes a finished team run of n events (model replies, tool
// calls with results, file changes, evidence, claims and verdicts) under
// home/runs/id, with the real Log.
func writeRun(tb testing.TB, home, id string, n int) string {
	tb.Helper()
	dir := filepath.Join(home, "runs", id)
	l, err := record.Create(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	add := func(typ, agent string, p any) {
		if _, err := l.Append(typ, agent, p); err != nil {
			tb.Fatal(err)
		}
	}
	add(record.TypeRunStarted, "", record.RunStarted{RunID: id, Objective: "sum the regions", Tools: []string{"dispatch"}})
	out := strings.Repeat("a line of a file that was read; ", 16)
	ev, k, turn := 0, 0, 0
	for i := 1; l.Seq() < int64(n-1); i++ {
		agent := fmt.Sprintf("A%d", i%4+1)
		turn++
		call := fmt.Sprintf("c%d", i)
		add(record.TypeModelResponse, agent, record.ModelResponse{Turn: turn})
		add(record.TypeToolCall, agent, record.ToolCall{CallID: call, Name: "read_file", Turn: turn, Arguments: `{"path":"/inputs/a.csv"}`})
		add(record.TypeToolResult, agent, record.ToolResult{CallID: call, Name: "read_file", Output: out})
		if i%5 == 0 {
			add(record.TypeFileDelta, agent, record.FileDelta{CallID: call, Path: fmt.Sprintf("/outputs/f%d.md", i%40), After: fmt.Sprintf("sha256:%064x", i), Bytes: 10})
		}
		if i%10 == 0 {
			ev++
			add(record.TypeEvidence, agent, record.Evidence{ID: fmt.Sprintf("E%d", ev), Kind: "file", Source: "/inputs/a.csv", SHA256: "x", Text: out})
		}
		if i%25 == 0 && ev > 0 {
			k++
			id := fmt.Sprintf("K%d", k)
			add(record.TypeClaim, agent, record.Claim{ID: id, Text: fmt.Sprintf("The total is %d.", i), StatedBy: agent, Evidence: []string{fmt.Sprintf("E%d", ev)}})
			add(record.TypeVerdict, "V1", record.Verdict{ClaimID: id, Verdict: "supported", Evidence: []string{fmt.Sprintf("E%d", ev)}})
		}
	}
	for l.Seq() < int64(n-1) {
		add(record.TypeModelResponse, "lead", record.ModelResponse{Turn: 1})
	}
	add(record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "done"})
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// views are the page's reads of a run.
var views = []string{"", "/board", "/activity", "/files", "/evidence", "/claims", "/transcript?after=4990"}

func get(tb testing.TB, url string) []byte {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	return body
}

// BenchmarkView is one request for a view of a 5,000-event run, after the
// first (the page polls its views while it is open).
//
//	go test -run '^$' -bench BenchmarkView -count 5 ./internal/web
func BenchmarkView(b *testing.B) {
	home := b.TempDir()
	writeRun(b, home, "big", 5000)
	srv := httptest.NewServer(New(Config{Home: home}))
	defer srv.Close()
	for _, v := range views {
		name := strings.TrimPrefix(v, "/")
		if name == "" {
			name = "run"
		}
		name, _, _ = strings.Cut(name, "?")
		b.Run(name, func(b *testing.B) {
			url := srv.URL + "/api/runs/big" + v
			get(b, url)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				get(b, url)
			}
		})
	}
}
