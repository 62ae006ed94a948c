package replay

import (
	"fmt"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Loops that share an agent id (every verifier of an older record is
// "verifier") are told apart: a new live loop gets the recorded loop with
// its task, whatever order they start in, and keeps it by the reply it was
// last handed.
func TestConversationsUnderOneID(t *testing.T) {
	m := &replayModel{dir: t.TempDir()}
	b := newConvBuilder(m)
	seq := int64(0)
	request := func(turn int, msgs string) {
		seq++
		e := record.Event{Seq: seq, Type: record.TypeModelRequest, Agent: "verifier",
			Raw: []byte(fmt.Sprintf(`{"seq":%d,"type":"model_request","agent":"verifier","turn":%d,"messages":[%s]}`, seq, turn, msgs))}
		mq, ok := record.As[record.ModelRequest](e)
		if !ok {
			t.Fatalf("request %d does not decode", seq)
		}
		b.request(e, mq)
	}
	reply := func(turn int, id, text string) {
		seq++
		b.turn("verifier", turn, recordedTurn{seq: seq, resp: llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: text,
			ToolCalls: []llm.ToolCall{{ID: id, Name: "bash"}}}}})
	}
	// Loop A, then loop B, one after the other; their first calls have the
	// same id (a scripted policy numbers calls per loop).
	request(1, `{"role":"user","content":"Claim:\nA\n"}`)
	reply(1, "call_1_0", "A1")
	request(2, `{"role":"tool","tool_call_id":"call_1_0","content":"x"}`)
	reply(2, "call_2_0", "A2")
	request(1, `{"role":"user","content":"Claim:\nB\n"}`)
	reply(1, "call_1_0", "B1")
	request(2, `{"role":"tool","tool_call_id":"call_1_0","content":"x"}`)
	reply(2, "call_2_0", "B2")
	m.convs = b.byAgent
	if len(m.convs["verifier"]) != 2 {
		t.Fatalf("%d loops, want 2", len(m.convs["verifier"]))
	}
	hand := func(req *llm.Request) string {
		c := m.conv(req)
		if c == nil || c.next >= len(c.turns) {
			return "none"
		}
		c.next, c.last = c.next+1, &c.turns[c.next].resp.Message
		return c.last.Content
	}
	// The replay starts B's loop first, then A's; they interleave.
	b1 := hand(&llm.Request{Agent: "verifier", Turn: 0, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Claim:\nB\n"}}})
	a1 := hand(&llm.Request{Agent: "verifier", Turn: 0, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Claim:\nA\n"}}})
	next := func(last string) *llm.Request {
		return &llm.Request{Agent: "verifier", Turn: 1, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Claim"},
			{Role: llm.RoleAssistant, Content: last, ToolCalls: []llm.ToolCall{{ID: "call_1_0", Name: "bash"}}}}}
	}
	a2 := hand(next("A1"))
	b2 := hand(next("B1"))
	if got := []string{b1, a1, a2, b2}; fmt.Sprint(got) != "[B1 A1 A2 B2]" {
		t.Fatalf("handed %v, want [B1 A1 A2 B2]", got)
	}
	if c := m.conv(&llm.Request{Agent: "verifier", Turn: 0, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Claim:\nC\n"}}}); c != nil {
		t.Fatal("a third loop got a recorded one")
	}
}
