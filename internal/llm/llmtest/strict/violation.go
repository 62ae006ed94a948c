package strict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Rules a request can break: the stable names Violation.Rule takes. A name
// shared by both APIs means the same mistake in each. The package doc says
// what each rule checks and where it comes from.
const (
	RuleJSON              = "json"                // the body is not a JSON object
	RuleFieldType         = "field-type"          // a field has the wrong JSON type
	RuleModel             = "model"               // model missing or empty
	RuleMaxTokens         = "max-tokens"          // Anthropic: max_tokens missing or < 1
	RuleSystem            = "system"              // Anthropic: system is not a string or text blocks
	RuleMessages          = "messages"            // messages missing or empty
	RuleRole              = "role"                // a role the API does not know
	RuleFirstUser         = "first-user"          // Anthropic: the first message is not the user's
	RuleAlternation       = "alternation"         // Anthropic: two messages of one role in a row
	RuleNullContent       = "null-content"        // OpenAI: content null or missing where a string is due
	RuleEmptyContent      = "empty-content"       // Anthropic: a message with empty content
	RuleEmptyText         = "empty-text"          // Anthropic: an empty or whitespace-only text block
	RuleContentType       = "content-type"        // content or a content block of the wrong shape
	RuleToolCallShape     = "tool-call-shape"     // a tool call without id, type or name; input not an object
	RuleArguments         = "arguments-json"      // OpenAI: tool-call arguments not a string holding JSON
	RuleBlockRole         = "block-role"          // Anthropic: tool_use outside assistant, tool_result outside user
	RuleDuplicateCallID   = "duplicate-call-id"   // two tool calls with one id in a request
	RuleDuplicateAnswer   = "duplicate-answer"    // OpenAI: two tool messages answer one call
	RuleToolWithoutCall   = "tool-without-call"   // a tool result that answers no call of the turn before
	RuleCallWithoutAnswer = "call-without-answer" // a tool call left unanswered
	RuleResultsFirst      = "results-first"       // Anthropic: tool_result blocks not first in their message
	RuleToolsRequired     = "tools-required"      // Anthropic: tool blocks in a request without tools
	RuleToolType          = "tool-type"           // OpenAI: a tool that is not {"type":"function","function":{…}}
	RuleToolName          = "tool-name"           // a tool name outside ^[a-zA-Z0-9_-]{1,64}$
	RuleToolSchema        = "tool-schema"         // a tool schema that is not a JSON Schema of type object
)

// Violation is one broken rule: what the real API would refuse, and how.
type Violation struct {
	// Rule is one of the Rule* names.
	Rule string
	// Index is the position in "messages" of the message at fault, or -1
	// when the fault is elsewhere (model, tools, the body itself).
	Index int
	// Where names the place at fault: "messages[3]", "tools[0]", "request".
	Where string
	// Text is the API's error message; Status and Body are its answer.
	Text   string
	Status int
	Body   []byte
}

func (v *Violation) Error() string {
	return fmt.Sprintf("rule %q at %s: %s", v.Rule, v.Where, v.Text)
}

// openAIError is the error OpenAI answers; param and code are null when "".
func openAIError(rule string, index int, where, param, code, text string) *Violation {
	var p, c any
	if param != "" {
		p = param
	}
	if code != "" {
		c = code
	}
	type body struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	}
	b := mustJSON(struct {
		Error body `json:"error"`
	}{body{text, "invalid_request_error", p, c}})
	return &Violation{Rule: rule, Index: index, Where: where, Text: text, Status: http.StatusBadRequest, Body: b}
}

// anthropicError is the error the Messages API answers.
func anthropicError(rule string, index int, where, text string) *Violation {
	return &Violation{Rule: rule, Index: index, Where: where, Text: text, Status: http.StatusBadRequest,
		Body: AnthropicErrorBody("invalid_request_error", text)}
}

// AnthropicErrorBody is the error object the Messages API answers with.
func AnthropicErrorBody(typ, text string) []byte {
	type body struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return mustJSON(struct {
		Type  string `json:"type"`
		Error body   `json:"error"`
	}{"error", body{typ, text}})
}

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the real APIs write '<' and '&' as they are
	if err := enc.Encode(v); err != nil {
		panic(err) // only plain structs and maps are encoded
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// kind is the JSON type of a raw value as the APIs name it: "" when the
// field is absent, else null, string, number, boolean, array or object.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case 'n':
		return "null"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "number"
}

// str decodes a raw JSON string; ok is false for any other kind.
func str(raw json.RawMessage) (string, bool) {
	var s string
	if kind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// integer decodes a raw JSON number that fits an int.
func integer(raw json.RawMessage) (int, bool) {
	var n int
	if kind(raw) != "number" || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}

// array decodes a raw JSON array into its elements.
func array(raw json.RawMessage) ([]json.RawMessage, bool) {
	var elems []json.RawMessage
	if kind(raw) != "array" || json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	return elems, true
}

// object decodes a raw JSON object into v (a struct of json.RawMessage
// fields, so every field's type is checked by the caller).
func object(raw json.RawMessage, v any) bool {
	return kind(raw) == "object" && json.Unmarshal(raw, v) == nil
}

// toolName is the pattern both APIs document for tool names.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// schemas remembers compile results by schema text, as a run sends the
// same tools with every request; it stops growing at maxSchemas (a fuzzer
// sends a new schema every time).
var schemas struct {
	sync.Mutex
	problem map[string]string
}

const maxSchemas = 1024

// schemaProblem compiles a tool schema (a JSON object) as JSON Schema
// draft 2020-12 and says what is wrong with it, "" when nothing is.
// References outside the schema are not loaded.
func schemaProblem(raw json.RawMessage) string {
	schemas.Lock()
	p, ok := schemas.problem[string(raw)]
	schemas.Unlock()
	if ok {
		return p
	}
	p = compileSchema(raw)
	schemas.Lock()
	defer schemas.Unlock()
	if schemas.problem == nil {
		schemas.problem = map[string]string{}
	}
	if len(schemas.problem) < maxSchemas {
		schemas.problem[string(raw)] = p
	}
	return p
}

func compileSchema(raw json.RawMessage) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err.Error()
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("tool.json", doc); err != nil {
		return err.Error()
	}
	if _, err := c.Compile("tool.json"); err != nil {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	return ""
}

// noLoader refuses every outside reference, so a schema never reads a file
// or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("outside reference %s is not loaded", url)
}
