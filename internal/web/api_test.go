package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/web"
)

func TestAPIOverAFinishedTeamRun(t *testing.T) {
	home := t.TempDir()
	finishedTeamRun(t, home, "team-1")
	srv := serve(t, web.Config{Home: home})

	var runs []struct {
		ID, Status, Liveness, Mode string
		Termination                string `json:"termination_reason"`
	}
	if code := get(t, srv, "/api/runs", &runs); code != 200 || len(runs) != 1 || runs[0].ID != "team-1" || runs[0].Status != "completed" || runs[0].Liveness != "finished" || runs[0].Mode != "team" || runs[0].Termination != "completed" {
		t.Fatalf("/api/runs: %d %+v", code, runs)
	}
	var detail struct {
		RunID  string `json:"run_id"`
		RunDir string `json:"run_dir"`
		Agents []struct{ Agent string }
		Usage  struct {
			Total int `json:"total_tokens"`
		}
	}
	if get(t, srv, "/api/runs/team-1", &detail); detail.RunID != "team-1" || len(detail.Agents) < 4 || detail.Usage.Total == 0 || detail.RunDir != "" {
		t.Errorf("run detail %+v (the run dir is not shown)", detail)
	}
	var b struct {
		Found bool
		Items []struct{ ID, Title, State string }
	}
	get(t, srv, "/api/runs/team-1/board", &b)
	var titles []string
	for _, it := range b.Items {
		titles = append(titles, it.Title+":"+it.State)
	}
	if got := strings.Join(titles, ","); !b.Found || got != "North total:resolved,South total:resolved,Report:resolved" {
		t.Errorf("board %q", got)
	}
	var act struct {
		Agents []struct {
			Agent, Role, Parent string
			ToolCalls           int `json:"tool_calls"`
			ActiveMS            int `json:"active_ms"`
		}
	}
	get(t, srv, "/api/runs/team-1/activity", &act)
	if len(act.Agents) != 6 || act.Agents[0].Agent != "lead" || act.Agents[0].ToolCalls == 0 {
		t.Errorf("activity %+v", act.Agents)
	}
	// The two verifiers of the lead's two verify calls are two lanes.
	verifiers := 0
	for _, a := range act.Agents {
		if a.Role == "verifier" && a.Parent == "lead" && (a.Agent == "V1" || a.Agent == "V2") {
			verifiers++
		}
	}
	if verifiers != 2 {
		t.Errorf("activity %+v; want V1 and V2, role verifier, parent lead", act.Agents)
	}
	var files struct {
		Files []struct {
			Path, Producer string
			Provenance     []json.RawMessage
		}
	}
	get(t, srv, "/api/runs/team-1/files", &files)
	var report bool
	for _, f := range files.Files {
		if f.Path == "/outputs/report.md" && f.Producer == "A3" && len(f.Provenance) > 0 {
			report = true
		}
	}
	if !report {
		t.Errorf("files %+v: no /outputs/report.md by A3 with provenance", files.Files)
	}
	resp, err := http.Get(srv.URL + "/api/runs/team-1/files/outputs/report.md")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "563") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("report.md: %d %q", resp.StatusCode, body)
	}
	var evs []record.Event
	if get(t, srv, "/api/runs/team-1/events?after=10", &evs); len(evs) == 0 || evs[0].Seq != 11 || evs[len(evs)-1].Type != record.TypeRunFinished {
		t.Errorf("events after 10: %d, first %+v", len(evs), evs[0])
	}
	var graph struct {
		Nodes []struct {
			ID, Kind, Status, Why string
			Settled               bool
		}
		Edges []struct{ From, To, Kind string }
	}
	if code := get(t, srv, "/api/runs/team-1/claims", &graph); code != 200 || graph.Nodes == nil || graph.Edges == nil {
		t.Errorf("claims: %d %+v (want a graph, not null)", code, graph)
	}
	// The team demo's reports state claims: the graph is the claim ledger.
	ledger := false
	for _, n := range graph.Nodes {
		ledger = ledger || (n.Kind == "claim" && n.ID == "K1" && n.Status != "" && n.Why != "" && n.Settled)
	}
	if !ledger {
		t.Errorf("claims: no ledger claim K1 with a status in %+v", graph.Nodes)
	}
	var ev []json.RawMessage
	if code := get(t, srv, "/api/runs/team-1/evidence", &ev); code != 200 || ev == nil {
		t.Errorf("evidence: %d %v", code, ev)
	}
	var tr []struct{ Kind, Agent string }
	if get(t, srv, "/api/runs/team-1/transcript", &tr); len(tr) == 0 {
		t.Error("no transcript")
	}
	// A finished run takes no more messages.
	if code, out := post(t, srv, "/api/runs/team-1/messages", `{"text":"hello"}`); code != http.StatusConflict || !strings.Contains(out["error"].(string), "finished") {
		t.Errorf("message to a finished run: %d %v", code, out)
	}
}

// sseEvent is one event read off the stream.
type sseEvent struct {
	id        int64
	typ, data string
}

// readSSE reads events until n record events arrived or the stream ended.
func readSSE(t *testing.T, body io.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
				if cur.typ == "end" || len(out) >= n {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func openStream(t *testing.T, ctx context.Context, url, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// The stream follows a live run with rising ids, resumes after
// Last-Event-ID, and a message POSTed meanwhile reaches the run's record.
func TestStreamFollowsALiveRunAndAMessageIsDelivered(t *testing.T) {
	home := t.TempDir()
	done := liveTeamRun(t, home, "live-1", 40*time.Millisecond)
	srv := serve(t, web.Config{Home: home})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	resp := openStream(t, ctx, srv.URL+"/api/runs/live-1/stream", "")
	first := readSSE(t, resp.Body, 10)
	resp.Body.Close()
	if len(first) != 10 {
		t.Fatalf("got %d events", len(first))
	}
	for i, e := range first {
		if e.typ != "record" || e.id != int64(i+1) {
			t.Fatalf("event %d: %+v, want record id %d", i, e, i+1)
		}
		var ev record.Event
		if json.Unmarshal([]byte(e.data), &ev) != nil || ev.Seq != e.id {
			t.Fatalf("event %d data %q does not carry seq %d", i, e.data, e.id)
		}
	}
	var lst []struct{ Liveness string }
	if get(t, srv, "/api/runs", &lst); len(lst) != 1 || lst[0].Liveness != "live" {
		t.Errorf("runs while live: %+v", lst)
	}
	code, out := post(t, srv, "/api/runs/live-1/messages", `{"text":"Please also mention the grand total."}`)
	if code != http.StatusAccepted || out["id"] != "M1" || out["live"] != true {
		t.Fatalf("message: %d %v", code, out)
	}

	// Resume after the tenth: the next id is 11, and the stream runs to the end.
	resp = openStream(t, ctx, srv.URL+"/api/runs/live-1/stream", "10")
	rest := readSSE(t, resp.Body, 1<<30)
	resp.Body.Close()
	if len(rest) < 2 || rest[0].id != 11 || rest[len(rest)-1].typ != "end" {
		t.Fatalf("resumed stream: %d events, first %+v", len(rest), rest[0])
	}
	delivered := false
	for i, e := range rest[:len(rest)-1] {
		if e.id != int64(11+i) {
			t.Fatalf("resumed event %d has id %d, want %d (no gaps)", i, e.id, 11+i)
		}
		if strings.Contains(e.data, `"type":"message"`) && strings.Contains(e.data, "grand total") {
			delivered = true
		}
	}
	<-done
	if !delivered {
		t.Error("the POSTed message never reached the record")
	}
}
