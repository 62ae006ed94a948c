package strict

import (
	"fmt"
	"strings"
	"testing"
)

// Pieces of Chat Completions bodies.
const (
	oaTool  = `{"type":"function","function":{"name":"read_file","description":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}`
	oaSys   = `{"role":"system","content":"be brief"}`
	oaUser  = `{"role":"user","content":"hi"}`
	oaReply = `{"role":"assistant","content":"done"}`
)

// oaCalls is an assistant message calling read_file once per id.
func oaCalls(ids ...string) string {
	var calls []string
	for _, id := range ids {
		calls = append(calls, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}`, id))
	}
	return `{"role":"assistant","content":"","tool_calls":[` + strings.Join(calls, ",") + `]}`
}

// oaAnswer is the tool message answering id.
func oaAnswer(id string) string {
	return fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"contents"}`, id)
}

// oaBody is a request with the read_file tool and msgs.
func oaBody(msgs ...string) string {
	return `{"model":"m","tools":[` + oaTool + `],"messages":[` + strings.Join(msgs, ",") + `]}`
}

// oaWith is a request with one user message and tools.
func oaWith(tools string) string {
	return `{"model":"m","tools":[` + tools + `],"messages":[` + oaUser + `]}`
}

type checkCase struct {
	name  string
	body  string
	rule  string // "" when the body is valid
	index int    // the message at fault, -1 for none
}

var openAICases = []checkCase{
	{"one user message", oaBody(oaUser), "", 0},
	{"a whole tool conversation", oaBody(oaSys, oaUser, oaCalls("a", "b"), oaAnswer("b"), oaAnswer("a"), oaReply,
		`{"role":"developer","content":"mind the budget"}`, oaUser, oaCalls("c"), oaAnswer("c")), "", 0},
	{"null content beside tool calls", oaBody(oaUser, strings.Replace(oaCalls("a"), `"content":""`, `"content":null`, 1), oaAnswer("a")), "", 0},
	{"no content beside tool calls", oaBody(oaUser, strings.Replace(oaCalls("a"), `"content":"",`, ``, 1), oaAnswer("a")), "", 0},
	{"content as text parts", oaBody(`{"role":"user","content":[{"type":"text","text":"hi"}]}`), "", 0},
	{"system messages anywhere", oaBody(oaUser, oaReply, oaSys, oaUser), "", 0},
	{"a tool without parameters", oaWith(`{"type":"function","function":{"name":"now"}}`), "", 0},
	{"streaming options", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[` + oaUser + `]}`, "", 0},

	{"not JSON", `{"model":`, RuleJSON, -1},
	{"null body", `null`, RuleJSON, -1},
	{"an array body", `[]`, RuleJSON, -1},
	{"no model", `{"messages":[` + oaUser + `]}`, RuleModel, -1},
	{"empty model", `{"model":"","messages":[` + oaUser + `]}`, RuleModel, -1},
	{"no messages", `{"model":"m"}`, RuleMessages, -1},
	{"empty messages", `{"model":"m","messages":[]}`, RuleMessages, -1},
	{"messages not an array", `{"model":"m","messages":{}}`, RuleFieldType, -1},
	{"stream not a boolean", `{"model":"m","stream":"yes","messages":[` + oaUser + `]}`, RuleFieldType, -1},
	{"max_tokens not an integer", `{"model":"m","max_tokens":1.5,"messages":[` + oaUser + `]}`, RuleFieldType, -1},
	{"a message not an object", oaBody(oaUser, `"hi"`), RuleFieldType, 1},
	{"the function role", oaBody(oaUser, `{"role":"function","name":"f","content":"x"}`), RuleRole, 1},
	{"no role", oaBody(`{"content":"hi"}`), RuleRole, 0},
	{"a role that is a number", oaBody(`{"role":1,"content":"hi"}`), RuleFieldType, 0},
	{"null user content", oaBody(`{"role":"user","content":null}`), RuleNullContent, 0},
	{"no user content", oaBody(oaSys, `{"role":"user"}`), RuleNullContent, 1},
	{"null tool content", oaBody(oaUser, oaCalls("a"), `{"role":"tool","tool_call_id":"a","content":null}`), RuleNullContent, 2},
	{"null assistant content without calls", oaBody(oaUser, `{"role":"assistant","content":null}`), RuleNullContent, 1},
	{"no assistant content without calls", oaBody(oaUser, `{"role":"assistant"}`), RuleNullContent, 1},
	{"content a number", oaBody(`{"role":"user","content":7}`), RuleContentType, 0},
	{"a content part without type", oaBody(`{"role":"user","content":[{"text":"hi"}]}`), RuleContentType, 0},
	{"empty tool_calls", oaBody(oaUser, `{"role":"assistant","content":"x","tool_calls":[]}`), RuleToolCallShape, 1},
	{"tool_calls on a user message", oaBody(`{"role":"user","content":"hi","tool_calls":[]}`), RuleToolCallShape, 0},
	{"a call without id", oaBody(oaUser, strings.Replace(oaCalls("a"), `"id":"a",`, ``, 1)), RuleToolCallShape, 1},
	{"a call of another type", oaBody(oaUser, strings.Replace(oaCalls("a"), `"function","function"`, `"fn","function"`, 1)), RuleToolCallShape, 1},
	{"a call without name", oaBody(oaUser, strings.Replace(oaCalls("a"), `"name":"read_file",`, ``, 1)), RuleToolCallShape, 1},
	{"arguments not JSON", oaBody(oaUser, strings.Replace(oaCalls("a"), `"{\"path\":\"a\"}"`, `"{\"path\": "`, 1), oaAnswer("a")), RuleArguments, 1},
	{"empty arguments", oaBody(oaUser, strings.Replace(oaCalls("a"), `"{\"path\":\"a\"}"`, `""`, 1), oaAnswer("a")), RuleArguments, 1},
	{"arguments an object", oaBody(oaUser, strings.Replace(oaCalls("a"), `"{\"path\":\"a\"}"`, `{"path":"a"}`, 1), oaAnswer("a")), RuleArguments, 1},
	{"one id called twice in a message", oaBody(oaUser, oaCalls("a", "a")), RuleDuplicateCallID, 1},
	{"one id called in two turns", oaBody(oaUser, oaCalls("a"), oaAnswer("a"), oaCalls("a")), RuleDuplicateCallID, 3},
	{"a tool message first", oaBody(oaAnswer("a"), oaUser), RuleToolWithoutCall, 0},
	{"an answer to an unknown id", oaBody(oaUser, oaCalls("a"), oaAnswer("a"), oaAnswer("b")), RuleToolWithoutCall, 3},
	{"an answer after the user spoke", oaBody(oaUser, oaCalls("a"), oaAnswer("a"), oaUser, oaAnswer("b")), RuleToolWithoutCall, 4},
	{"an answer after a plain reply", oaBody(oaUser, oaReply, oaAnswer("a")), RuleToolWithoutCall, 2},
	{"an answer without tool_call_id", oaBody(oaUser, oaCalls("a"), `{"role":"tool","content":"x"}`), RuleToolWithoutCall, 2},
	{"one call answered twice", oaBody(oaUser, oaCalls("a", "b"), oaAnswer("a"), oaAnswer("a"), oaAnswer("b")), RuleDuplicateAnswer, 3},
	{"an answer repeated a turn later", oaBody(oaUser, oaCalls("a"), oaAnswer("a"), oaCalls("b"), oaAnswer("b"), oaAnswer("a")), RuleDuplicateAnswer, 5},
	{"a call left unanswered before the user", oaBody(oaUser, oaCalls("a", "b"), oaAnswer("a"), oaUser), RuleCallWithoutAnswer, 1},
	{"a call left unanswered at the end", oaBody(oaUser, oaCalls("a")), RuleCallWithoutAnswer, 1},
	{"a system message between call and answer", oaBody(oaUser, oaCalls("a"), oaSys, oaAnswer("a")), RuleCallWithoutAnswer, 1},
	{"an assistant message between call and answer", oaBody(oaUser, oaCalls("a"), oaReply, oaAnswer("a")), RuleCallWithoutAnswer, 1},
	{"a tool of another type", oaWith(`{"type":"retrieval"}`), RuleToolType, -1},
	{"a tool without function", oaWith(`{"type":"function"}`), RuleToolType, -1},
	{"a tool name with a space", oaWith(`{"type":"function","function":{"name":"read file"}}`), RuleToolName, -1},
	{"a tool name with a dot", oaWith(`{"type":"function","function":{"name":"fs.read"}}`), RuleToolName, -1},
	{"a tool name of 65 characters", oaWith(`{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}`), RuleToolName, -1},
	{"parameters of type array", oaWith(`{"type":"function","function":{"name":"f","parameters":{"type":"array"}}}`), RuleToolSchema, -1},
	{"parameters without type", oaWith(`{"type":"function","function":{"name":"f","parameters":{"properties":{}}}}`), RuleToolSchema, -1},
	{"parameters that are not a schema", oaWith(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"text"}}}}}`), RuleToolSchema, -1},
	{"parameters a string", oaWith(`{"type":"function","function":{"name":"f","parameters":"{}"}}`), RuleFieldType, -1},
}

func TestCheckOpenAI(t *testing.T) {
	for _, c := range openAICases {
		t.Run(c.name, func(t *testing.T) {
			checkOne(t, c, CheckOpenAI([]byte(c.body)))
		})
	}
}

// checkOne compares a checker's answer with a case.
func checkOne(t *testing.T, c checkCase, v *Violation) {
	t.Helper()
	switch {
	case c.rule == "" && v != nil:
		t.Fatalf("valid body refused: %v\n%s", v, c.body)
	case c.rule == "":
		return
	case v == nil:
		t.Fatalf("body accepted, want rule %q\n%s", c.rule, c.body)
	case v.Rule != c.rule || v.Index != c.index:
		t.Fatalf("got rule %q at index %d (%v), want %q at %d\n%s", v.Rule, v.Index, v, c.rule, c.index, c.body)
	case v.Status != 400 || !strings.Contains(string(v.Body), jsonString(v.Text)):
		t.Fatalf("answer %d %s does not carry the text %q", v.Status, v.Body, v.Text)
	case c.index >= 0 && !strings.Contains(v.Error(), fmt.Sprintf("messages[%d]", c.index)):
		t.Fatalf("message %q does not name messages[%d]", v.Error(), c.index)
	}
}

// jsonString is s as it appears inside a JSON string.
func jsonString(s string) string {
	return strings.Trim(string(mustJSON(s)), `"`)
}

// The answers are the real API's, byte for byte where its wording is known.
func TestOpenAIAnswers(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{oaBody(oaUser, oaCalls("a"), oaAnswer("a"), oaAnswer("b")),
			`{"error":{"message":"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.","type":"invalid_request_error","param":"messages.[3].role","code":null}}`},
		{oaBody(oaUser, oaCalls("call_x", "call_y"), oaAnswer("call_y"), oaUser),
			`{"error":{"message":"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_x","type":"invalid_request_error","param":"messages.[1].role","code":null}}`},
		{oaBody(`{"role":"user","content":null}`),
			`{"error":{"message":"Invalid value for 'content': expected a string, got null.","type":"invalid_request_error","param":"messages.[0].content","code":null}}`},
		{oaWith(`{"type":"function","function":{"name":"a/b"}}`),
			`{"error":{"message":"Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.","type":"invalid_request_error","param":"tools[0].function.name","code":"invalid_value"}}`},
		{oaWith(`{"type":"function","function":{"name":"f","parameters":{}}}`),
			`{"error":{"message":"Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`},
	} {
		v := CheckOpenAI([]byte(c.body))
		if v == nil || string(v.Body) != c.want {
			t.Errorf("answer to\n%s\nis %v\n%s\nwant\n%s", c.body, v, bodyOf(v), c.want)
		}
	}
}

func bodyOf(v *Violation) []byte {
	if v == nil {
		return nil
	}
	return v.Body
}

// Arbitrary bytes never make the checker panic, and a body it accepts is
// one the fake can decode.
func FuzzCheckOpenAI(f *testing.F) {
	for _, c := range openAICases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v := CheckOpenAI(body)
		if v != nil {
			if v.Rule == "" || v.Status != 400 || len(v.Body) == 0 {
				t.Fatalf("incomplete violation %+v", v)
			}
		}
	})
}
