package strict

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CheckOpenAI checks a Chat Completions request body against the rules the
// real API enforces (see the package doc) and returns the first rule
// broken, in message order, or nil when the body is valid.
func CheckOpenAI(body []byte) *Violation {
	var req struct {
		Model         json.RawMessage `json:"model"`
		Messages      json.RawMessage `json:"messages"`
		Tools         json.RawMessage `json:"tools"`
		Stream        json.RawMessage `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
		MaxTokens     json.RawMessage `json:"max_tokens"`
	}
	if !object(body, &req) {
		return openAIError(RuleJSON, -1, "request", "", "",
			"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. "+
				"The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	if model, ok := str(req.Model); !ok || model == "" {
		return openAIError(RuleModel, -1, "request", "", "", "you must provide a model parameter")
	}
	if v := oaTopTypes(req.Stream, req.StreamOptions, req.MaxTokens); v != nil {
		return v
	}
	if v := oaTools(req.Tools); v != nil {
		return v
	}
	msgs, ok := array(req.Messages)
	switch {
	case kind(req.Messages) == "":
		return openAIError(RuleMessages, -1, "request", "messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	case !ok:
		return oaType(-1, "request", "messages", "an array", req.Messages)
	case len(msgs) == 0:
		return openAIError(RuleMessages, -1, "request", "messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	h := oaHistory{open: -1, callAt: map[string]int{}, answeredAt: map[string]int{}}
	for i, raw := range msgs {
		if v := h.message(i, raw); v != nil {
			return v
		}
	}
	return h.close(len(msgs))
}

// oaHistory follows tool calls and their answers through the messages.
type oaHistory struct {
	open       int      // index of the assistant message being answered, -1 when none
	calls      []string // its call ids, in order
	pending    map[string]bool
	callAt     map[string]int // call id -> assistant message making it
	answeredAt map[string]int // call id -> tool message answering it
}

type oaMessage struct {
	Role       json.RawMessage `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
	Name       json.RawMessage `json:"name"`
}

func (h *oaHistory) message(i int, raw json.RawMessage) *Violation {
	where := fmt.Sprintf("messages[%d]", i)
	var m oaMessage
	if !object(raw, &m) {
		return oaType(i, where, where, "an object", raw)
	}
	role, ok := str(m.Role)
	switch {
	case kind(m.Role) == "":
		return openAIError(RuleRole, i, where, where+".role", "missing_required_parameter",
			fmt.Sprintf("Missing required parameter: '%s.role'.", where))
	case !ok:
		return oaType(i, where, where+".role", "a string", m.Role)
	}
	if k := kind(m.Name); k != "" && k != "string" {
		return oaType(i, where, where+".name", "a string", m.Name)
	}
	if k := kind(m.ToolCallID); role != "tool" && k != "" && k != "null" && k != "string" {
		return oaType(i, where, where+".tool_call_id", "a string", m.ToolCallID)
	}
	if k := kind(m.ToolCalls); role != "assistant" && k != "" && k != "null" {
		return openAIError(RuleToolCallShape, i, where, where+".tool_calls", "",
			fmt.Sprintf("Invalid parameter: only messages with role 'assistant' can have 'tool_calls' (%s has role '%s').", where, role))
	}
	if role != "tool" && h.open >= 0 {
		if v := h.close(i); v != nil {
			return v
		}
	}
	switch role {
	case "system", "developer", "user":
		return oaContent(i, where, m.Content, false)
	case "assistant":
		return h.assistant(i, where, m)
	case "tool":
		return h.tool(i, where, m)
	}
	return openAIError(RuleRole, i, where, where+".role", "invalid_value",
		fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", role))
}

// assistant checks an assistant message and opens its calls for answers.
func (h *oaHistory) assistant(i int, where string, m oaMessage) *Violation {
	var ids []string
	if k := kind(m.ToolCalls); k != "" && k != "null" {
		calls, ok := array(m.ToolCalls)
		switch {
		case !ok:
			return oaType(i, where, where+".tool_calls", "an array", m.ToolCalls)
		case len(calls) == 0:
			return openAIError(RuleToolCallShape, i, where, where+".tool_calls", "empty_array",
				fmt.Sprintf("Invalid '%s.tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.", where))
		}
		for j, c := range calls {
			id, v := oaToolCall(i, fmt.Sprintf("%s.tool_calls[%d]", where, j), c)
			if v != nil {
				return v
			}
			if at, dup := h.callAt[id]; dup {
				return openAIError(RuleDuplicateCallID, i, where, fmt.Sprintf("%s.tool_calls[%d].id", where, j), "",
					fmt.Sprintf("Invalid parameter: Duplicate value for 'tool_calls.id' of '%s', in messages[%d] and messages[%d].", id, at, i))
			}
			h.callAt[id] = i
			ids = append(ids, id)
		}
	}
	if v := oaContent(i, where, m.Content, len(ids) > 0); v != nil {
		return v
	}
	if len(ids) > 0 {
		h.open, h.calls, h.pending = i, ids, map[string]bool{}
		for _, id := range ids {
			h.pending[id] = true
		}
	}
	return nil
}

// oaToolCall checks one call of an assistant message and returns its id.
func oaToolCall(i int, path string, raw json.RawMessage) (string, *Violation) {
	where := fmt.Sprintf("messages[%d]", i)
	var c struct {
		ID       json.RawMessage `json:"id"`
		Type     json.RawMessage `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	var f struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	missing := func(field string) (string, *Violation) {
		return "", openAIError(RuleToolCallShape, i, where, path+"."+field, "missing_required_parameter",
			fmt.Sprintf("Missing required parameter: '%s.%s'.", path, field))
	}
	if !object(raw, &c) {
		return "", oaType(i, where, path, "an object", raw)
	}
	id, ok := str(c.ID)
	switch {
	case kind(c.ID) == "" || kind(c.ID) == "null":
		return missing("id")
	case !ok:
		return "", oaType(i, where, path+".id", "a string", c.ID)
	}
	switch typ, ok := str(c.Type); {
	case kind(c.Type) == "":
		return missing("type")
	case !ok:
		return "", oaType(i, where, path+".type", "a string", c.Type)
	case typ != "function":
		return "", openAIError(RuleToolCallShape, i, where, path+".type", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", typ))
	}
	switch {
	case kind(c.Function) == "":
		return missing("function")
	case !object(c.Function, &f):
		return "", oaType(i, where, path+".function", "an object", c.Function)
	}
	switch name, ok := str(f.Name); {
	case kind(f.Name) == "":
		return missing("function.name")
	case !ok:
		return "", oaType(i, where, path+".function.name", "a string", f.Name)
	case name == "":
		return "", openAIError(RuleToolCallShape, i, where, path+".function.name", "empty_string",
			fmt.Sprintf("Invalid '%s.function.name': empty string. Expected a string with minimum length 1, but got an empty string instead.", path))
	}
	args, ok := str(f.Arguments)
	switch {
	case kind(f.Arguments) == "":
		return missing("function.arguments")
	case !ok:
		return "", openAIError(RuleArguments, i, where, path+".function.arguments", "invalid_type",
			fmt.Sprintf("Invalid type for '%s.function.arguments': expected a string, but got %s instead.", path, kindName(f.Arguments)))
	case !json.Valid([]byte(args)):
		return "", openAIError(RuleArguments, i, where, path+".function.arguments", "invalid_value",
			fmt.Sprintf("Invalid '%s.function.arguments': expected a string holding JSON, but got %q.", path, cutText(args, 80)))
	}
	return id, nil
}

// tool checks a tool message against the calls it may answer.
func (h *oaHistory) tool(i int, where string, m oaMessage) *Violation {
	id, ok := str(m.ToolCallID)
	switch {
	case kind(m.ToolCallID) == "" || kind(m.ToolCallID) == "null" || (ok && id == ""):
		return openAIError(RuleToolWithoutCall, i, where, where+".tool_call_id", "",
			"Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.")
	case !ok:
		return oaType(i, where, where+".tool_call_id", "a string", m.ToolCallID)
	}
	if at, dup := h.answeredAt[id]; dup {
		return openAIError(RuleDuplicateAnswer, i, where, where+".tool_call_id", "",
			fmt.Sprintf("Invalid parameter: Duplicate value for 'tool_call_id' of '%s', in messages[%d] and messages[%d].", id, at, i))
	}
	if h.open < 0 || !h.pending[id] {
		return openAIError(RuleToolWithoutCall, i, where, fmt.Sprintf("messages.[%d].role", i), "",
			"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
	}
	delete(h.pending, id)
	h.answeredAt[id] = i
	return oaContent(i, where, m.Content, false)
}

// close ends the answers to the open assistant message at message i (or
// at the end of the messages): every call must have had one.
func (h *oaHistory) close(i int) *Violation {
	if h.open < 0 {
		return nil
	}
	var missing []string
	for _, id := range h.calls {
		if h.pending[id] {
			missing = append(missing, id)
		}
	}
	at := h.open
	h.open, h.calls, h.pending = -1, nil, nil
	if len(missing) == 0 {
		return nil
	}
	where := fmt.Sprintf("messages[%d]", at)
	return openAIError(RuleCallWithoutAnswer, at, where, fmt.Sprintf("messages.[%d].role", at), "",
		"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "+
			"The following tool_call_ids did not have response messages: "+strings.Join(missing, ", "))
}

// oaContent checks message content: a string or an array of parts; null or
// missing only when the message has tool calls.
func oaContent(i int, where string, raw json.RawMessage, callsMayStandIn bool) *Violation {
	switch kind(raw) {
	case "string":
		return nil
	case "array":
		parts, ok := array(raw)
		if !ok {
			return oaType(i, where, where+".content", "one of a string or array of objects", raw)
		}
		for j, p := range parts {
			var part struct {
				Type json.RawMessage `json:"type"`
			}
			if !object(p, &part) {
				return openAIError(RuleContentType, i, where, fmt.Sprintf("%s.content[%d]", where, j), "invalid_type",
					fmt.Sprintf("Invalid type for '%s.content[%d]': expected an object, but got %s instead.", where, j, kindName(p)))
			}
			if _, ok := str(part.Type); !ok {
				return openAIError(RuleContentType, i, where, fmt.Sprintf("%s.content[%d].type", where, j), "missing_required_parameter",
					fmt.Sprintf("Missing required parameter: '%s.content[%d].type'.", where, j))
			}
		}
		return nil
	case "", "null":
		if callsMayStandIn {
			return nil
		}
		if kind(raw) == "" {
			return openAIError(RuleNullContent, i, where, where+".content", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.content'.", where))
		}
		return openAIError(RuleNullContent, i, where, fmt.Sprintf("messages.[%d].content", i), "",
			"Invalid value for 'content': expected a string, got null.")
	}
	return openAIError(RuleContentType, i, where, where+".content", "invalid_type",
		fmt.Sprintf("Invalid type for '%s.content': expected one of a string or array of objects, but got %s instead.", where, kindName(raw)))
}

// oaTopTypes checks the types of the optional top-level fields the fake reads.
func oaTopTypes(stream, options, maxTokens json.RawMessage) *Violation {
	if k := kind(stream); k != "" && k != "null" && k != "boolean" {
		return oaType(-1, "request", "stream", "a boolean", stream)
	}
	if k := kind(options); k != "" && k != "null" {
		var o struct {
			IncludeUsage json.RawMessage `json:"include_usage"`
		}
		if !object(options, &o) {
			return oaType(-1, "request", "stream_options", "an object", options)
		}
		if k := kind(o.IncludeUsage); k != "" && k != "null" && k != "boolean" {
			return oaType(-1, "request", "stream_options.include_usage", "a boolean", o.IncludeUsage)
		}
	}
	if k := kind(maxTokens); k != "" && k != "null" {
		if _, ok := integer(maxTokens); !ok {
			return oaType(-1, "request", "max_tokens", "an integer", maxTokens)
		}
	}
	return nil
}

// oaTools checks the function tools offered.
func oaTools(raw json.RawMessage) *Violation {
	if k := kind(raw); k == "" || k == "null" {
		return nil
	}
	tools, ok := array(raw)
	if !ok {
		return oaType(-1, "request", "tools", "an array", raw)
	}
	for j, t := range tools {
		where := fmt.Sprintf("tools[%d]", j)
		var tool struct {
			Type     json.RawMessage `json:"type"`
			Function json.RawMessage `json:"function"`
		}
		var f struct {
			Name        json.RawMessage `json:"name"`
			Description json.RawMessage `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if !object(t, &tool) {
			return oaType(-1, where, where, "an object", t)
		}
		switch typ, ok := str(tool.Type); {
		case kind(tool.Type) == "":
			return openAIError(RuleToolType, -1, where, where+".type", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.type'.", where))
		case !ok || typ != "function":
			return openAIError(RuleToolType, -1, where, where+".type", "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", cutText(string(tool.Type), 40)))
		case kind(tool.Function) == "":
			return openAIError(RuleToolType, -1, where, where+".function", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.function'.", where))
		case !object(tool.Function, &f):
			return oaType(-1, where, where+".function", "an object", tool.Function)
		}
		name, ok := str(f.Name)
		switch {
		case kind(f.Name) == "":
			return openAIError(RuleToolName, -1, where, where+".function.name", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.function.name'.", where))
		case !ok:
			return oaType(-1, where, where+".function.name", "a string", f.Name)
		case len(name) > 64:
			return openAIError(RuleToolName, -1, where, where+".function.name", "string_above_max_length",
				fmt.Sprintf("Invalid '%s.function.name': string too long. Expected a string with maximum length 64, but got a string with length %d instead.", where, len(name)))
		case !toolName.MatchString(name):
			return openAIError(RuleToolName, -1, where, where+".function.name", "invalid_value",
				fmt.Sprintf("Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", where))
		}
		if k := kind(f.Description); k != "" && k != "null" && k != "string" {
			return oaType(-1, where, where+".function.description", "a string", f.Description)
		}
		if v := oaSchema(where, name, f.Parameters); v != nil {
			return v
		}
	}
	return nil
}

// oaSchema checks a function's parameters: absent, or a JSON Schema whose
// top level is type object.
func oaSchema(where, name string, raw json.RawMessage) *Violation {
	param := where + ".function.parameters"
	bad := func(why string) *Violation {
		return openAIError(RuleToolSchema, -1, where, param, "invalid_function_parameters",
			fmt.Sprintf("Invalid schema for function '%s': %s", name, why))
	}
	switch kind(raw) {
	case "", "null":
		return nil
	case "object":
	default:
		return oaType(-1, where, param, "an object", raw)
	}
	var top struct {
		Type json.RawMessage `json:"type"`
	}
	if !object(raw, &top) {
		return oaType(-1, where, param, "an object", raw)
	}
	if typ, _ := str(top.Type); typ != "object" {
		got := "None"
		if kind(top.Type) != "" {
			got = cutText(string(top.Type), 40)
		}
		return bad(fmt.Sprintf(`schema must be a JSON Schema of 'type: "object"', got 'type: "%s"'.`, strings.Trim(got, `"`)))
	}
	if p := schemaProblem(raw); p != "" {
		return bad(p + ".")
	}
	return nil
}

// oaType is OpenAI's answer to a field of the wrong JSON type.
func oaType(i int, where, param, want string, raw json.RawMessage) *Violation {
	return openAIError(RuleFieldType, i, where, param, "invalid_type",
		fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, kindName(raw)))
}

// kindName names a JSON value's type as OpenAI's errors do.
func kindName(raw json.RawMessage) string {
	switch k := kind(raw); k {
	case "":
		return "nothing"
	case "null":
		return "null"
	case "array", "object":
		return "an " + k
	case "number":
		if _, ok := integer(raw); ok {
			return "an integer"
		}
		return "a decimal"
	default:
		return "a " + k
	}
}

// cutText shortens s for an error message.
func cutText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
