package strict

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// CheckAnthropic checks a Messages API request body against the rules the
// real API enforces (see the package doc) and returns the first rule
// broken, in message order, or nil when the body is valid.
func CheckAnthropic(body []byte) *Violation {
	var req struct {
		Model     json.RawMessage `json:"model"`
		MaxTokens json.RawMessage `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  json.RawMessage `json:"messages"`
		Tools     json.RawMessage `json:"tools"`
		Stream    json.RawMessage `json:"stream"`
	}
	if !object(body, &req) {
		return anthropicError(RuleJSON, -1, "request", "The request body is not valid JSON.")
	}
	model, ok := str(req.Model)
	switch {
	case kind(req.Model) == "":
		return anthropicError(RuleModel, -1, "request", "model: Field required")
	case !ok:
		return anthropicError(RuleModel, -1, "request", "model: Input should be a valid string")
	case model == "":
		return anthropicError(RuleModel, -1, "request", "model: String should have at least 1 character")
	}
	n, ok := integer(req.MaxTokens)
	switch {
	case kind(req.MaxTokens) == "":
		return anthropicError(RuleMaxTokens, -1, "request", "max_tokens: Field required")
	case !ok:
		return anthropicError(RuleMaxTokens, -1, "request", "max_tokens: Input should be a valid integer")
	case n < 1:
		return anthropicError(RuleMaxTokens, -1, "request", "max_tokens: Input should be greater than or equal to 1")
	}
	if k := kind(req.Stream); k != "" && k != "boolean" {
		return anthropicError(RuleFieldType, -1, "request", "stream: Input should be a valid boolean")
	}
	if v := anSystem(req.System); v != nil {
		return v
	}
	tools, v := anTools(req.Tools)
	if v != nil {
		return v
	}
	msgs, ok := array(req.Messages)
	switch {
	case kind(req.Messages) == "":
		return anthropicError(RuleMessages, -1, "request", "messages: Field required")
	case !ok:
		return anthropicError(RuleMessages, -1, "request", "messages: Input should be a valid list")
	case len(msgs) == 0:
		return anthropicError(RuleMessages, -1, "request", "messages: at least one message is required")
	}
	h := anHistory{seen: map[string]bool{}, last: len(msgs) - 1}
	for i, raw := range msgs {
		if v := h.message(i, raw); v != nil {
			return v
		}
	}
	if v := h.answered(len(msgs), nil); v != nil {
		return v
	}
	if h.toolBlocks && tools == 0 {
		return anthropicError(RuleToolsRequired, -1, "request", "Requests which include `tool_use` or `tool_result` blocks must define tools.")
	}
	return nil
}

// anHistory follows roles and tool_use ids through the messages.
type anHistory struct {
	last       int             // index of the last message
	prevRole   string          // role of the message before
	uses       []string        // tool_use ids of the message before, in order
	seen       map[string]bool // every tool_use id so far
	toolBlocks bool            // a tool_use or tool_result was seen
}

// anBlock is any content block; fields of other block types are ignored.
type anBlock struct {
	Type      json.RawMessage `json:"type"`
	Text      json.RawMessage `json:"text"`
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   json.RawMessage `json:"is_error"`
}

// toolUseID is the pattern the API enforces on tool_use ids.
var toolUseID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func (h *anHistory) message(i int, raw json.RawMessage) *Violation {
	where := fmt.Sprintf("messages[%d]", i)
	path := fmt.Sprintf("messages.%d", i)
	bad := func(rule, text string) *Violation { return anthropicError(rule, i, where, text) }
	var m struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if !object(raw, &m) {
		return bad(RuleFieldType, path+": Input should be a valid dictionary")
	}
	role, _ := str(m.Role)
	switch {
	case kind(m.Role) == "":
		return bad(RuleRole, path+".role: Field required")
	case role != "user" && role != "assistant":
		return bad(RuleRole, path+".role: Input should be 'user' or 'assistant'")
	case i == 0 && role != "user":
		return bad(RuleFirstUser, `messages: first message must use the "user" role`)
	case role == h.prevRole:
		return bad(RuleAlternation, fmt.Sprintf(`messages: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, role))
	}
	blocks, v := h.content(i, role, m.Content)
	if v != nil {
		return v
	}
	if role == "user" {
		if v := h.answered(i, blocks); v != nil {
			return v
		}
	}
	h.prevRole, h.uses = role, nil
	for _, b := range blocks {
		if t, _ := str(b.Type); t == "tool_use" {
			id, _ := str(b.ID)
			h.uses = append(h.uses, id)
		}
	}
	return nil
}

// content checks a message's content and returns its blocks (none for
// string content).
func (h *anHistory) content(i int, role string, raw json.RawMessage) ([]anBlock, *Violation) {
	where := fmt.Sprintf("messages[%d]", i)
	path := fmt.Sprintf("messages.%d", i)
	bad := func(rule, text string) ([]anBlock, *Violation) { return nil, anthropicError(rule, i, where, text) }
	empty := func() ([]anBlock, *Violation) {
		if i == h.last && role == "assistant" {
			return nil, nil // the optional final assistant message may be empty
		}
		return bad(RuleEmptyContent, path+": all messages must have non-empty content except for the optional final assistant message")
	}
	if s, ok := str(raw); ok {
		switch {
		case s == "":
			return empty()
		case strings.TrimSpace(s) == "":
			return bad(RuleEmptyText, "messages: text content blocks must contain non-whitespace text")
		}
		return nil, nil
	}
	elems, ok := array(raw)
	switch {
	case kind(raw) == "":
		return bad(RuleContentType, path+".content: Field required")
	case !ok:
		return bad(RuleContentType, path+".content: Input should be a valid list")
	case len(elems) == 0:
		return empty()
	}
	blocks := make([]anBlock, len(elems))
	for j, e := range elems {
		bpath := fmt.Sprintf("%s.content.%d", path, j)
		b := &blocks[j]
		if !object(e, b) {
			return bad(RuleContentType, bpath+": Input should be a valid dictionary")
		}
		typ, ok := str(b.Type)
		if !ok {
			return bad(RuleContentType, bpath+".type: Field required")
		}
		var v *Violation
		switch typ {
		case "text":
			v = anText(i, where, bpath, b.Text)
		case "tool_use":
			v = h.toolUse(i, where, bpath, role, b)
		case "tool_result":
			v = h.toolResult(i, where, bpath, role, b)
		}
		if v != nil {
			return nil, v
		}
	}
	return blocks, nil
}

// anText checks a text block's text.
func anText(i int, where, bpath string, raw json.RawMessage) *Violation {
	s, ok := str(raw)
	switch {
	case kind(raw) == "":
		return anthropicError(RuleContentType, i, where, bpath+".text: Field required")
	case !ok:
		return anthropicError(RuleContentType, i, where, bpath+".text: Input should be a valid string")
	case s == "":
		return anthropicError(RuleEmptyText, i, where, "messages: text content blocks must be non-empty")
	case strings.TrimSpace(s) == "":
		return anthropicError(RuleEmptyText, i, where, "messages: text content blocks must contain non-whitespace text")
	}
	return nil
}

func (h *anHistory) toolUse(i int, where, bpath, role string, b *anBlock) *Violation {
	bad := func(rule, text string) *Violation { return anthropicError(rule, i, where, text) }
	h.toolBlocks = true
	if role != "assistant" {
		return bad(RuleBlockRole, bpath+": `tool_use` blocks can only be in assistant messages")
	}
	id, ok := str(b.ID)
	switch {
	case kind(b.ID) == "":
		return bad(RuleToolCallShape, bpath+".tool_use.id: Field required")
	case !ok || !toolUseID.MatchString(id):
		return bad(RuleToolCallShape, bpath+".tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
	case h.seen[id]:
		return bad(RuleDuplicateCallID, bpath+": `tool_use` ids must be unique")
	}
	h.seen[id] = true
	switch name, ok := str(b.Name); {
	case kind(b.Name) == "":
		return bad(RuleToolCallShape, bpath+".tool_use.name: Field required")
	case !ok:
		return bad(RuleToolCallShape, bpath+".tool_use.name: Input should be a valid string")
	case name == "":
		return bad(RuleToolCallShape, bpath+".tool_use.name: String should have at least 1 character")
	}
	switch kind(b.Input) {
	case "":
		return bad(RuleToolCallShape, bpath+".tool_use.input: Field required")
	case "object":
		if !json.Valid(b.Input) {
			return bad(RuleToolCallShape, bpath+".tool_use.input: Input should be a valid dictionary")
		}
	default:
		return bad(RuleToolCallShape, bpath+".tool_use.input: Input should be a valid dictionary")
	}
	return nil
}

func (h *anHistory) toolResult(i int, where, bpath, role string, b *anBlock) *Violation {
	bad := func(rule, text string) *Violation { return anthropicError(rule, i, where, text) }
	h.toolBlocks = true
	if role != "user" {
		return bad(RuleBlockRole, bpath+": `tool_result` blocks can only be in user messages")
	}
	if _, ok := str(b.ToolUseID); !ok {
		if kind(b.ToolUseID) == "" {
			return bad(RuleToolWithoutCall, bpath+".tool_result.tool_use_id: Field required")
		}
		return bad(RuleFieldType, bpath+".tool_result.tool_use_id: Input should be a valid string")
	}
	if k := kind(b.IsError); k != "" && k != "boolean" {
		return bad(RuleFieldType, bpath+".tool_result.is_error: Input should be a valid boolean")
	}
	switch kind(b.Content) {
	case "", "string":
		return nil
	case "array":
	default:
		return bad(RuleContentType, bpath+".tool_result.content: Input should be a valid list")
	}
	inner, ok := array(b.Content)
	if !ok {
		return bad(RuleContentType, bpath+".tool_result.content: Input should be a valid list")
	}
	for k, e := range inner {
		ipath := fmt.Sprintf("%s.tool_result.content.%d", bpath, k)
		var ib anBlock
		if !object(e, &ib) {
			return bad(RuleContentType, ipath+": Input should be a valid dictionary")
		}
		typ, ok := str(ib.Type)
		switch {
		case !ok:
			return bad(RuleContentType, ipath+".type: Field required")
		case typ == "text":
			if v := anText(i, where, ipath, ib.Text); v != nil {
				return v
			}
		case typ == "tool_use" || typ == "tool_result":
			return bad(RuleContentType, ipath+": Input tag '"+typ+"' found using 'type' does not match any of the expected tags")
		}
	}
	return nil
}

// answered checks the user message i (blocks, nil for text or for the end
// of the messages) against the tool_use ids of the assistant message before.
func (h *anHistory) answered(i int, blocks []anBlock) *Violation {
	var results []string // tool_use_ids of the leading tool_result blocks
	lead, late := true, false
	for _, b := range blocks {
		if t, _ := str(b.Type); t == "tool_result" {
			id, _ := str(b.ToolUseID)
			if lead {
				results = append(results, id)
			} else {
				late = true
			}
		} else {
			lead = false
		}
	}
	where := fmt.Sprintf("messages[%d]", i)
	if len(h.uses) == 0 {
		if len(results) > 0 || late {
			return anthropicError(RuleToolWithoutCall, i, where,
				fmt.Sprintf("messages.%d: `tool_result` block(s) provided when previous message does not have any `tool_use` blocks", i))
		}
		return nil
	}
	if late {
		return anthropicError(RuleResultsFirst, i, where,
			fmt.Sprintf("messages.%d: Did not find %d `tool_result` block(s) at the beginning of this message. "+
				"Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.", i, len(h.uses)))
	}
	uses := map[string]bool{}
	for _, id := range h.uses {
		uses[id] = true
	}
	for j, id := range results {
		if !uses[id] {
			return anthropicError(RuleToolWithoutCall, i, where,
				fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
					"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id))
		}
	}
	answered := map[string]bool{}
	for _, id := range results {
		answered[id] = true
	}
	var missing []string
	for _, id := range h.uses {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		at := i - 1
		return anthropicError(RuleCallWithoutAnswer, at, fmt.Sprintf("messages[%d]", at),
			fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", at, strings.Join(missing, ", ")))
	}
	return nil
}

// anSystem checks the top-level system prompt: a string or text blocks.
func anSystem(raw json.RawMessage) *Violation {
	if k := kind(raw); k == "" || k == "string" {
		return nil
	}
	elems, ok := array(raw)
	if !ok {
		return anthropicError(RuleSystem, -1, "system", "system: Input should be a valid list")
	}
	for j, e := range elems {
		path := fmt.Sprintf("system.%d", j)
		var b anBlock
		if !object(e, &b) {
			return anthropicError(RuleSystem, -1, "system", path+": Input should be a valid dictionary")
		}
		if t, _ := str(b.Type); t != "text" {
			return anthropicError(RuleSystem, -1, "system", path+".type: Input should be 'text'")
		}
		if v := anText(-1, "system", path, b.Text); v != nil {
			v.Rule = RuleSystem
			v.Text = strings.Replace(v.Text, "messages:", "system:", 1)
			v.Body = AnthropicErrorBody("invalid_request_error", v.Text)
			return v
		}
	}
	return nil
}

// anTools checks the tools offered and returns how many there are.
func anTools(raw json.RawMessage) (int, *Violation) {
	if kind(raw) == "" {
		return 0, nil
	}
	tools, ok := array(raw)
	if !ok {
		return 0, anthropicError(RuleFieldType, -1, "tools", "tools: Input should be a valid list")
	}
	for j, t := range tools {
		where := fmt.Sprintf("tools[%d]", j)
		path := fmt.Sprintf("tools.%d.custom", j)
		bad := func(rule, text string) (int, *Violation) { return 0, anthropicError(rule, -1, where, text) }
		var tool struct {
			Type        json.RawMessage `json:"type"`
			Name        json.RawMessage `json:"name"`
			Description json.RawMessage `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if !object(t, &tool) {
			return bad(RuleFieldType, fmt.Sprintf("tools.%d: Input should be a valid dictionary", j))
		}
		typ, ok := str(tool.Type)
		if kind(tool.Type) != "" && !ok {
			return bad(RuleFieldType, fmt.Sprintf("tools.%d.type: Input should be a valid string", j))
		}
		if k := kind(tool.Description); k != "" && k != "string" {
			return bad(RuleFieldType, path+".description: Input should be a valid string")
		}
		name, ok := str(tool.Name)
		switch {
		case kind(tool.Name) == "":
			return bad(RuleToolName, path+".name: Field required")
		case !ok:
			return bad(RuleToolName, path+".name: Input should be a valid string")
		case typ != "" && typ != "custom":
			continue // a server tool (web_search_…, bash_…): the API defines its input
		case !toolName.MatchString(name):
			return bad(RuleToolName, path+".name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'")
		}
		var top struct {
			Type json.RawMessage `json:"type"`
		}
		switch {
		case kind(tool.InputSchema) == "":
			return bad(RuleToolSchema, path+".input_schema: Field required")
		case !object(tool.InputSchema, &top):
			return bad(RuleToolSchema, path+".input_schema: Input should be a valid dictionary")
		case kind(top.Type) == "":
			return bad(RuleToolSchema, path+".input_schema.type: Field required")
		}
		if s, _ := str(top.Type); s != "object" {
			return bad(RuleToolSchema, path+".input_schema.type: Input should be 'object'")
		}
		if schemaProblem(tool.InputSchema) != "" {
			return bad(RuleToolSchema, path+".input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12 "+
				"(https://json-schema.org/draft/2020-12). Learn more about tool use at https://docs.claude.com/en/docs/tool-use.")
		}
	}
	return len(tools), nil
}
