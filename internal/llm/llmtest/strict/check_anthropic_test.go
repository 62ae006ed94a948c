package strict

import (
	"fmt"
	"strings"
	"testing"
)

// Pieces of Messages API bodies.
const (
	anTool  = `{"name":"read_file","description":"read","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}`
	anUser  = `{"role":"user","content":"hi"}`
	anReply = `{"role":"assistant","content":[{"type":"text","text":"done"}]}`
)

// anUses is an assistant message with some text and one tool_use per id.
func anUses(ids ...string) string {
	blocks := []string{`{"type":"text","text":"reading"}`}
	for _, id := range ids {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"read_file","input":{"path":"a"}}`, id))
	}
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}

// anResults is a user message of tool_result blocks, one per id, then the
// extra blocks.
func anResults(ids []string, extra ...string) string {
	var blocks []string
	for _, id := range ids {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%q,"content":"contents"}`, id))
	}
	return `{"role":"user","content":[` + strings.Join(append(blocks, extra...), ",") + `]}`
}

func ids(s ...string) []string { return s }

// anBody is a request with the read_file tool and msgs.
func anBody(msgs ...string) string {
	return `{"model":"m","max_tokens":1024,"system":"be brief","tools":[` + anTool + `],"messages":[` + strings.Join(msgs, ",") + `]}`
}

// anWith is a request with one user message and tools.
func anWith(tools string) string {
	return `{"model":"m","max_tokens":1024,"tools":[` + tools + `],"messages":[` + anUser + `]}`
}

const anTextBlock = `{"type":"text","text":"go on"}`

var anthropicCases = []checkCase{
	{"one user message", anBody(anUser), "", 0},
	{"a whole tool conversation", anBody(anUser, anUses("a", "b"), anResults(ids("b", "a"), anTextBlock), anReply, anUser,
		anUses("c"), anResults(ids("c"))), "", 0},
	{"system as text blocks", `{"model":"m","max_tokens":1,"system":[{"type":"text","text":"be brief"}],"messages":[` + anUser + `]}`, "", 0},
	{"an empty final assistant message", anBody(anUser, `{"role":"assistant","content":""}`), "", 0},
	{"a tool_result with blocks and an error", anBody(anUser, anUses("a"),
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":[{"type":"text","text":"no such file"}]}]}`), "", 0},
	{"a tool_result without content", anBody(anUser, anUses("a"), `{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}`), "", 0},
	{"blocks the fake does not know", anBody(`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}`), "", 0},
	{"a server tool", anWith(`{"type":"web_search_20250305","name":"web_search","max_uses":3}`), "", 0},

	{"not JSON", `{"model":`, RuleJSON, -1},
	{"an array body", `[1]`, RuleJSON, -1},
	{"no model", `{"max_tokens":5,"messages":[` + anUser + `]}`, RuleModel, -1},
	{"no max_tokens", `{"model":"m","messages":[` + anUser + `]}`, RuleMaxTokens, -1},
	{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[` + anUser + `]}`, RuleMaxTokens, -1},
	{"max_tokens a string", `{"model":"m","max_tokens":"5","messages":[` + anUser + `]}`, RuleMaxTokens, -1},
	{"stream a string", `{"model":"m","max_tokens":5,"stream":"yes","messages":[` + anUser + `]}`, RuleFieldType, -1},
	{"system a number", `{"model":"m","max_tokens":5,"system":5,"messages":[` + anUser + `]}`, RuleSystem, -1},
	{"system with an empty block", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":""}],"messages":[` + anUser + `]}`, RuleSystem, -1},
	{"no messages", `{"model":"m","max_tokens":5}`, RuleMessages, -1},
	{"empty messages", `{"model":"m","max_tokens":5,"messages":[]}`, RuleMessages, -1},
	{"a system role in messages", anBody(`{"role":"system","content":"x"}`, anUser), RuleRole, 0},
	{"no role", anBody(`{"content":"x"}`), RuleRole, 0},
	{"an assistant first", anBody(anReply, anUser), RuleFirstUser, 0},
	{"two user messages in a row", anBody(anUser, anUser), RuleAlternation, 1},
	{"two assistant messages in a row", anBody(anUser, anReply, anReply), RuleAlternation, 2},
	{"empty string content", anBody(`{"role":"user","content":""}`), RuleEmptyContent, 0},
	{"empty block list", anBody(anUser, `{"role":"assistant","content":[]}`, anUser), RuleEmptyContent, 1},
	{"no content", anBody(`{"role":"user"}`), RuleContentType, 0},
	{"content a number", anBody(`{"role":"user","content":3}`), RuleContentType, 0},
	{"a block without type", anBody(`{"role":"user","content":[{"text":"x"}]}`), RuleContentType, 0},
	{"an empty text block", anBody(anUser, `{"role":"assistant","content":[{"type":"text","text":""},{"type":"tool_use","id":"a","name":"read_file","input":{}}]}`, anResults(ids("a"))), RuleEmptyText, 1},
	{"a whitespace text block", anBody(`{"role":"user","content":[{"type":"text","text":" \n"}]}`), RuleEmptyText, 0},
	{"whitespace string content", anBody(`{"role":"user","content":"  "}`), RuleEmptyText, 0},
	{"an empty text block in a result", anBody(anUser, anUses("a"), `{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":""}]}]}`), RuleEmptyText, 2},
	{"a tool_use in a user message", anBody(`{"role":"user","content":[{"type":"tool_use","id":"a","name":"read_file","input":{}}]}`), RuleBlockRole, 0},
	{"a tool_result in an assistant message", anBody(anUser, `{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}`), RuleBlockRole, 1},
	{"a tool_use id with a colon", anBody(anUser, anUses("read_file:0"), anResults(ids("read_file:0"))), RuleToolCallShape, 1},
	{"a tool_use without input", anBody(anUser, `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"read_file"}]}`, anResults(ids("a"))), RuleToolCallShape, 1},
	{"a tool_use input that is a string", anBody(anUser, `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"read_file","input":"{}"}]}`, anResults(ids("a"))), RuleToolCallShape, 1},
	{"one tool_use id twice in a message", anBody(anUser, anUses("a", "a"), anResults(ids("a"))), RuleDuplicateCallID, 1},
	{"one tool_use id in two turns", anBody(anUser, anUses("a"), anResults(ids("a")), anUses("a"), anResults(ids("a"))), RuleDuplicateCallID, 3},
	{"a tool_use answered by text", anBody(anUser, anUses("a"), anUser), RuleCallWithoutAnswer, 1},
	{"a tool_use half answered", anBody(anUser, anUses("a", "b"), anResults(ids("a"))), RuleCallWithoutAnswer, 1},
	{"a tool_use at the end", anBody(anUser, anUses("a")), RuleCallWithoutAnswer, 1},
	{"text before the results", anBody(anUser, anUses("a"), `{"role":"user","content":[`+anTextBlock+`,{"type":"tool_result","tool_use_id":"a","content":"x"}]}`), RuleResultsFirst, 2},
	{"a result after text, the rest first", anBody(anUser, anUses("a", "b"), anResults(ids("a"), anTextBlock, `{"type":"tool_result","tool_use_id":"b","content":"x"}`)), RuleResultsFirst, 2},
	{"a result first of all", anBody(anResults(ids("a"))), RuleToolWithoutCall, 0},
	{"a result after a plain reply", anBody(anUser, anReply, anResults(ids("a"))), RuleToolWithoutCall, 2},
	{"a result for an unknown id", anBody(anUser, anUses("a"), anResults(ids("a", "b"))), RuleToolWithoutCall, 2},
	{"a result for an id two turns back", anBody(anUser, anUses("a"), anResults(ids("a")), anUses("b"), anResults(ids("a", "b"))), RuleToolWithoutCall, 4},
	{"tool blocks without tools", `{"model":"m","max_tokens":5,"messages":[` + anUser + `,` + anUses("a") + `,` + anResults(ids("a")) + `]}`, RuleToolsRequired, -1},
	{"a tool name with a dot", anWith(`{"name":"fs.read","input_schema":{"type":"object"}}`), RuleToolName, -1},
	{"a tool name of 65 characters", anWith(`{"name":"` + strings.Repeat("x", 65) + `","input_schema":{"type":"object"}}`), RuleToolName, -1},
	{"a tool without name", anWith(`{"input_schema":{"type":"object"}}`), RuleToolName, -1},
	{"a tool without input_schema", anWith(`{"name":"f"}`), RuleToolSchema, -1},
	{"an input_schema without type", anWith(`{"name":"f","input_schema":{"properties":{}}}`), RuleToolSchema, -1},
	{"an input_schema of type string", anWith(`{"name":"f","input_schema":{"type":"string"}}`), RuleToolSchema, -1},
	{"an input_schema that does not compile", anWith(`{"name":"f","input_schema":{"type":"object","required":"path"}}`), RuleToolSchema, -1},
	{"an input_schema that refers outside", anWith(`{"name":"f","input_schema":{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}}`), RuleToolSchema, -1},
}

func TestCheckAnthropic(t *testing.T) {
	for _, c := range anthropicCases {
		t.Run(c.name, func(t *testing.T) {
			checkOne(t, c, CheckAnthropic([]byte(c.body)))
		})
	}
}

func TestAnthropicAnswers(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{anBody(anUser, anReply, anResults(ids("a"))),
			"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.2: `tool_result` block(s) provided when previous message does not have any `tool_use` blocks\"}}"},
		{anBody(anUser, anUses("toolu_1", "toolu_2"), anUser),
			"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1, toolu_2. Each `tool_use` block must have a corresponding `tool_result` block in the next message.\"}}"},
		{anBody(anUser, anUser),
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row"}}`},
		{anBody(`{"role":"user","content":[{"type":"text","text":""}]}`),
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}`},
		{`{"model":"m","messages":[` + anUser + `]}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`},
		{`{"model":"m","max_tokens":5,"messages":[` + anUser + `,` + anUses("a") + `,` + anResults(ids("a")) + `]}`,
			"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Requests which include `tool_use` or `tool_result` blocks must define tools.\"}}"},
	} {
		v := CheckAnthropic([]byte(c.body))
		if v == nil || string(v.Body) != c.want {
			t.Errorf("answer to\n%s\nis %v\n%s\nwant\n%s", c.body, v, bodyOf(v), c.want)
		}
	}
}

func FuzzCheckAnthropic(f *testing.F) {
	for _, c := range anthropicCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v := CheckAnthropic(body)
		if v != nil {
			if v.Rule == "" || v.Status != 400 || len(v.Body) == 0 {
				t.Fatalf("incomplete violation %+v", v)
			}
		}
	})
}
