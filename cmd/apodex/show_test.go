package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
)

type shownRun struct {
	Status    string `json:"status"`
	Turns     int    `json:"turns"`
	ToolCalls int    `json:"tool_calls"`
	Steps     []struct {
		Tool    string `json:"tool"`
		Args    string `json:"arguments"`
		IsError bool   `json:"is_error"`
	} `json:"steps"`
}

func showJSON(t *testing.T, home, id string) shownRun {
	t.Helper()
	code, out, errOut := cli(t, "show", "--json", "--home", home, id)
	var r shownRun
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("show --json: exit %d\n%s%s", code, out, errOut)
	}
	return r
}

// show marks as failed the call that failed, not another call of the same
// tool in the same turn.
func TestShowMarksTheFailedCall(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(
		call("write_file", map[string]any{"path": "/etc/refused", "content": "x"}),
		call("write_file", map[string]any{"path": "/workspace/fine.txt", "content": "x"}),
	)))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := showJSON(t, home, decodeSummary(t, out).RunID)
	if len(r.Steps) != 3 {
		t.Fatalf("steps %+v", r.Steps)
	}
	for i, want := range []bool{true, false, false} {
		if r.Steps[i].IsError != want {
			t.Errorf("step %d (%s %s): is_error %v, want %v", i, r.Steps[i].Tool, r.Steps[i].Args, r.Steps[i].IsError, want)
		}
	}
}

// show and the run's own summary agree on the counts, also for a run whose
// only model call failed.
func TestShowAgreesWithRunSummary(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	home := t.TempDir()
	code, out, _ := cli(t, "run", "--home", home, "--provider", "openai", "--base-url", base, "--model", "m", "--retries", "1", "--json", "objective")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	s := decodeSummary(t, out)
	r := showJSON(t, home, s.RunID)
	if r.Turns != s.Turns || r.ToolCalls != s.ToolCalls || r.Status != s.Status {
		t.Errorf("run said turns %d, tool calls %d, %s; show says turns %d, tool calls %d, %s",
			s.Turns, s.ToolCalls, s.Status, r.Turns, r.ToolCalls, r.Status)
	}
	code, listed, _ := cli(t, "runs", "--home", home)
	if code != 0 || !strings.Contains(listed, s.RunID) {
		t.Errorf("runs: exit %d\n%s", code, listed)
	}
}
