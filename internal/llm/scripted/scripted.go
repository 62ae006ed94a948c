package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

// Policy decides the reply for a turn; turn counts from 0. It must be a pure
// function of its arguments for the Model to stay deterministic.
type Policy func(turn int, req *llm.Request) (*llm.Response, error)

// Model is an llm.Model that answers by calling a Policy.
type Model struct {
	policy Policy
}

var _ llm.Model = (*Model)(nil)

// New returns a Model playing p.
func New(p Policy) *Model {
	return &Model{policy: p}
}

// Generate calls the policy with turn = the number of assistant messages in
// req.Messages. On a copy of the policy's response it defaults the role to
// assistant, Model to "scripted" and FinishReason to "tool_calls" or "stop",
// gives calls without an ID the id "call_<turn>_<i>", and, when the policy
// left Usage zero, fills a reported estimate of one token per four
// characters.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, errors.New("scripted: nil request")
	}
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleAssistant {
			turn++
		}
	}
	turn = max(turn, req.Turn) // the loop's count survives compaction
	// A turn whose calls were cut off by a crash is played again after the
	// resume: the policy reacts to the interruption by retrying.
	turn -= interruptedTurns(req.Messages)
	if req.Purpose != "" {
		return runtimeReply(req), nil
	}
	view := req
	if last, ok := interruptedTail(req.Messages); ok {
		// Replaying a turn cut off by a crash: the policy sees the history
		// as it was when it first played the turn.
		v := *req
		v.Messages = req.Messages[:last]
		view = &v
	}
	got, err := m.policy(turn, view)
	if err != nil {
		return nil, err
	}
	if got == nil {
		return nil, fmt.Errorf("scripted: turn %d: the policy returned no response", turn)
	}
	resp := *got
	resp.Message.ToolCalls = retryOnly(req.Messages, append([]llm.ToolCall(nil), got.Message.ToolCalls...))
	if resp.Message.Role == "" {
		resp.Message.Role = llm.RoleAssistant
	}
	for i := range resp.Message.ToolCalls {
		if resp.Message.ToolCalls[i].ID == "" {
			resp.Message.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", turn, i)
		}
	}
	if resp.FinishReason == "" {
		resp.FinishReason = "stop"
		if len(resp.Message.ToolCalls) > 0 {
			resp.FinishReason = "tool_calls"
		}
	}
	if resp.Model == "" {
		resp.Model = "scripted"
	}
	if resp.Usage == (llm.Usage{}) {
		resp.Usage = estimate(req, &resp.Message)
	}
	return &resp, nil
}

// interruptedTail reports whether the last assistant turn has a call that
// was interrupted by a crash, and where that turn starts.
func interruptedTail(msgs []llm.Message) (int, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		for _, r := range msgs[i+1:] {
			if r.Role == llm.RoleTool && strings.HasPrefix(r.Content, llm.InterruptedMarker) {
				return i, true
			}
		}
		return 0, false
	}
	return 0, false
}

// retryOnly, when this turn replays one whose calls were cut off by a
// crash, keeps only the calls that were interrupted: the others completed
// before the stop, and doing them again would do them twice.
func retryOnly(msgs []llm.Message, calls []llm.ToolCall) []llm.ToolCall {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 || len(msgs[last].ToolCalls) != len(calls) {
		return calls
	}
	interrupted := map[string]bool{}
	for _, r := range msgs[last+1:] {
		if r.Role == llm.RoleTool && strings.HasPrefix(r.Content, llm.InterruptedMarker) {
			interrupted[r.ToolCallID] = true
		}
	}
	if len(interrupted) == 0 {
		return calls
	}
	var keep []llm.ToolCall
	for i, c := range msgs[last].ToolCalls {
		if interrupted[c.ID] {
			keep = append(keep, calls[i])
		}
	}
	return keep
}

// interruptedTurns counts the assistant turns with a call whose result says
// it was interrupted by a stop of the run.
func interruptedTurns(msgs []llm.Message) int {
	n := 0
	for i, m := range msgs {
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		for _, r := range msgs[i+1:] {
			if r.Role != llm.RoleTool {
				break
			}
			if strings.HasPrefix(r.Content, llm.InterruptedMarker) {
				n++
				break
			}
		}
	}
	return n
}

// runtimeReply answers the runtime's own calls (summary, finalization)
// deterministically, without consuming a scripted turn.
func runtimeReply(req *llm.Request) *llm.Response {
	var text string
	switch req.Purpose {
	case llm.PurposeVerify:
		text = verdict(req)
	case llm.PurposeSummary:
		text = fmt.Sprintf("Summary (scripted): %d earlier messages were condensed.", len(req.Messages))
	default:
		last := LastObservation(req)
		if r := []rune(last); len(r) > 200 {
			last = string(r[:200]) + "…"
		}
		text = "Partial result (scripted): the work so far is in /workspace; last observation: " + last
	}
	resp := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: text}, FinishReason: "stop", Model: "scripted"}
	if req.Purpose == llm.PurposeVerify && offers(req, "verdict") {
		// The verifier agent ends with its verdict tool.
		resp.Message.Content, resp.FinishReason = "", "tool_calls"
		resp.Message.ToolCalls = []llm.ToolCall{{ID: fmt.Sprintf("verdict_%d", len(req.Messages)), Name: "verdict", Arguments: text}}
	}
	resp.Usage = estimate(req, &resp.Message)
	return resp
}

func offers(req *llm.Request, name string) bool {
	for _, t := range req.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

var numbers = regexp.MustCompile(`[0-9][0-9.,]*[0-9]|[0-9]`)

// verdict is the scripted verifier: a claim is supported when every number
// in it appears in the evidence (or, without numbers, when the evidence
// contains the claim verbatim), else the evidence is insufficient.
func verdict(req *llm.Request) string {
	last := ""
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Content
	}
	claim, evidence, _ := strings.Cut(strings.TrimPrefix(last, "Claim:\n"), "\n\nEvidence:\n")
	nums := numbers.FindAllString(claim, -1)
	ok := len(nums) > 0
	for _, n := range nums {
		ok = ok && strings.Contains(evidence, n)
	}
	if len(nums) == 0 {
		ok = strings.Contains(evidence, strings.TrimSpace(claim))
	}
	if ok {
		return `{"verdict": "supported", "reason": "the evidence states it", "checks": ["compared the claim's numbers with the evidence"]}`
	}
	return `{"verdict": "insufficient", "location": "evidence", "reason": "the evidence does not state the claim", "repair": "cite the file that states it"}`
}

// estimate is the deterministic usage: prompt = characters of the request's
// messages and tool specs / 4, completion = characters of the reply / 4.
func estimate(req *llm.Request, reply *llm.Message) llm.Usage {
	prompt := 0
	for i := range req.Messages {
		prompt += messageChars(&req.Messages[i])
	}
	for _, t := range req.Tools {
		prompt += utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.Parameters)
	}
	u := llm.Usage{
		PromptTokens:     prompt / 4,
		CompletionTokens: messageChars(reply) / 4,
		Reported:         true,
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func messageChars(m *llm.Message) int {
	n := utf8.RuneCountInString(m.Content)
	for _, c := range m.ToolCalls {
		n += utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
	}
	return n
}

// Text returns an assistant reply with content s and no tool calls.
func Text(s string) *llm.Response {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: s}}
}

// Calls returns an assistant reply making calls.
func Calls(calls ...llm.ToolCall) *llm.Response {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}}
}

// Call returns a call of tool name with args marshalled to JSON; a
// json.RawMessage is used as is, even when malformed. The ID is left empty
// for Generate to fill. It panics if args cannot be marshalled, which is a
// bug in the test that calls it.
func Call(name string, args any) llm.ToolCall {
	var text string
	switch a := args.(type) {
	case json.RawMessage:
		text = string(a)
	default:
		b, err := json.Marshal(args)
		if err != nil {
			panic(fmt.Sprintf("scripted.Call(%q): %v", name, err))
		}
		text = string(b)
	}
	return llm.ToolCall{Name: name, Arguments: text}
}

// LastObservation returns the content of the tool messages after the last
// assistant message, joined by newlines: what the tools answered to the
// model's latest calls. It is "" when there are none.
func LastObservation(req *llm.Request) string {
	if req == nil {
		return ""
	}
	start := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleAssistant {
			start = i + 1
			break
		}
	}
	var parts []string
	for _, msg := range req.Messages[start:] {
		if msg.Role == llm.RoleTool {
			parts = append(parts, msg.Content)
		}
	}
	return strings.Join(parts, "\n")
}
