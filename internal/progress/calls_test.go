package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ev is an event as the record holds it.
func ev(seq int64, d time.Duration, typ, agent string, payload any) record.Event {
	raw, _ := json.Marshal(payload)
	return record.Event{Seq: seq, Time: t0.Add(d), Type: typ, Agent: agent, Raw: raw}
}

func bashCall(agent, id, command string) record.ToolCall {
	args, _ := json.Marshal(map[string]string{"command": command})
	return record.ToolCall{Turn: 1, CallID: id, Name: "bash", Arguments: string(args)}
}

func bashResult(id, stdout string) record.ToolResult {
	code := 0
	return record.ToolResult{Turn: 1, CallID: id, Name: "bash", Output: "exit code: 0\n--- stdout ---\n" + stdout + "--- stderr: empty ---",
		Meta: &record.ToolMeta{ExitCode: &code, DurationMS: 300}}
}

// Two agents of a team use the same call id (ids are per agent): each
// result is printed under the agent that ran it, with its own command and
// output (issue #28: A1's command showed under A2).
func TestTeamCallsKeyedByAgent(t *testing.T) {
	var b strings.Builder
	p := New(&b, Options{})
	for _, e := range []record.Event{
		ev(1, 0, record.TypeRunStarted, "", record.RunStarted{RunID: "r1"}),
		ev(2, time.Second, record.TypeToolCall, "A1", bashCall("A1", "call_1", "awk north.csv")),
		ev(3, time.Second, record.TypeToolCall, "A2", bashCall("A2", "call_1", "awk south.csv")),
		ev(4, 2*time.Second, record.TypeToolResult, "A2", bashResult("call_1", "201.25\n")),
		ev(5, 3*time.Second, record.TypeToolResult, "A1", bashResult("call_1", "361.75\n")),
	} {
		p.Event(e)
	}
	want := `[1.0s 0 tok] A1 t1 bash $ awk north.csv
[1.0s 0 tok] A2 t1 bash $ awk south.csv
[2.0s 0 tok] A2 t1 bash → ok exit 0 (0.3s)
    │ 201.25
[3.0s 0 tok] A1 t1 bash $ awk north.csv → ok exit 0 (0.3s)
    │ 361.75
`
	if got := b.String(); !strings.HasSuffix(got, want) {
		t.Errorf("got\n%s\nwant the end\n%s", got, want)
	}
}

// A command's output: its last lines by default, all of it (capped) with
// Verbose; stderr is marked.
func TestBashOutputTail(t *testing.T) {
	var lines strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	res := bashResult("c1", lines.String())
	res.Output = strings.Replace(res.Output, "--- stderr: empty ---", "--- stderr ---\nwarning: x", 1)
	run := func(opt Options) string {
		var b strings.Builder
		p := New(&b, opt)
		p.Event(ev(1, 0, record.TypeToolCall, "main", bashCall("main", "c1", "seq 10")))
		p.Event(ev(2, time.Second, record.TypeToolResult, "main", res))
		return b.String()
	}
	got := run(Options{})
	if !strings.Contains(got, "main t1 bash → ok exit 0 (0.3s)\n    │ … 7 lines above\n    │ line 8\n    │ line 9\n    │ line 10\n    │ stderr: warning: x\n") {
		t.Errorf("default:\n%s", got)
	}
	got = run(Options{Verbose: true})
	if !strings.Contains(got, "    │ line 1\n") || !strings.Contains(got, "    │ line 10\n    │ stderr: warning: x\n") || strings.Contains(got, "above") {
		t.Errorf("verbose:\n%s", got)
	}
}

// A model call in flight: without a terminal, a line once it has waited
// WaitAfter and again every WaitEvery, none after the reply.
func TestWaitingLines(t *testing.T) {
	var b strings.Builder
	p := New(&b, Options{})
	p.Event(ev(1, 0, record.TypeRunStarted, "", record.RunStarted{RunID: "r1"}))
	msg, _ := json.Marshal(llm.Message{Role: llm.RoleAssistant, Content: "ok"})
	p.Event(ev(2, time.Second, record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Message: msg, Usage: llm.Usage{TotalTokens: 3100}}))
	p.Event(ev(3, 2*time.Second, record.TypeModelRequest, "main", record.ModelRequest{Turn: 2}))
	b.Reset()
	for _, s := range []int{5, 14, 17, 30, 47, 48} {
		p.Tick(t0.Add(time.Duration(s) * time.Second))
	}
	want := "[17.0s 3.1k tok] main waiting for the model (15 s, 3.1k tokens so far)\n[47.0s 3.1k tok] main waiting for the model (45 s, 3.1k tokens so far)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p.Event(ev(4, 50*time.Second, record.TypeModelResponse, "main", record.ModelResponse{Turn: 2, Message: msg}))
	b.Reset()
	p.Tick(t0.Add(90 * time.Second))
	if b.Len() != 0 {
		t.Errorf("a line after the reply: %q", b.String())
	}
}

// On a terminal the status line is redrawn in place: the wait, the text
// being streamed, several agents at once; a progress line takes it off
// first, and End clears it.
func TestLiveStatusLine(t *testing.T) {
	var b strings.Builder
	now := t0
	p := New(&b, Options{Live: true, Now: func() time.Time { return now }})
	p.Event(ev(1, 0, record.TypeRunStarted, "", record.RunStarted{RunID: "r1"}))
	p.Event(ev(2, time.Second, record.TypeModelRequest, "main", record.ModelRequest{Turn: 1}))
	now = t0.Add(13 * time.Second)
	p.Tick(now)
	if got := b.String(); !strings.HasSuffix(got, "\r\x1b[Kmain waiting for the model (12 s, 0 tokens so far)") {
		t.Errorf("status %q", got)
	}
	now = now.Add(time.Second)
	p.Delta(llm.Caller{Agent: "main"}, "I will sum\nthe col")
	p.Delta(llm.Caller{Agent: "main"}, "umn \x1b[31mnow")
	now = now.Add(time.Second)
	p.Tick(now)
	if got := b.String(); !strings.HasSuffix(got, "\r\x1b[Kmain ✎ I will sum the column \\x1b[31mnow (14 s, 0 tokens so far)") {
		t.Errorf("streamed status %q", got)
	}
	now = now.Add(time.Second)
	p.Delta(llm.Caller{Agent: "A1"}, "x")
	if got := b.String(); !strings.HasSuffix(got, "\r\x1b[Kwaiting for the model: A1 0 s, main 15 s (0 tokens so far)") {
		t.Errorf("two agents %q", got)
	}
	msg, _ := json.Marshal(llm.Message{Role: llm.RoleAssistant, Content: "I will sum the column now"})
	b.Reset()
	p.Event(ev(3, 15*time.Second, record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Message: msg}))
	if got := b.String(); !strings.HasPrefix(got, "\r\x1b[K[15.0s 0 tok] main t1 I will sum the column now\n") || !strings.HasSuffix(got, "\r\x1b[KA1 ✎ x (0 s, 0 tokens so far)") {
		t.Errorf("a line over the status %q", got)
	}
	b.Reset()
	p.End()
	if b.String() != "\r\x1b[K" {
		t.Errorf("End: %q", b.String())
	}
}
