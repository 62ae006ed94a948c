// Package strict checks a request body as a real model API would before
// answering it: CheckOpenAI for OpenAI-compatible Chat Completions,
// CheckAnthropic for Anthropic Messages. Each returns nil for a body the
// API accepts, else the first broken rule as a Violation carrying the
// API's status and error body. The fake servers of llmtest refuse with it;
// client tests call it directly.
//
// # Rules
//
// Each rule has a stable name (the Rule* constants). Where the real API's
// wording is known the answer uses it; the sources are the API references
// (OpenAI: "Create chat completion" and the function-calling guide;
// Anthropic: "Messages" and the tool-use guide "Handle tool calls") and
// error bodies the APIs returned, as quoted in public issue threads (named
// below as owner/repo#n). Wording marked "ours" is not known and says the
// same thing.
//
// OpenAI Chat Completions (CheckOpenAI):
//   - json: the body is a JSON object (the API's "We could not parse the
//     JSON body of your request").
//   - model: model is a non-empty string (reference: required; "you must
//     provide a model parameter").
//   - messages: messages is a non-empty array (reference: required;
//     "Missing required parameter: 'messages'", "empty array").
//   - role: role is system, developer, user, assistant or tool (reference;
//     "Invalid value: … Supported values are"; the deprecated "function"
//     role is refused too). System and developer messages may come anywhere.
//   - null-content: user, system, developer and tool messages have string
//     (or text-part array) content; an assistant message may have null or
//     no content only when it has tool_calls (reference: "Required unless
//     tool_calls or function_call is specified"; "Invalid value for
//     'content': expected a string, got null.", langchain-ai/langchainjs#4153,
//     vercel/ai#14950). content-type: content of another JSON type.
//   - tool-call-shape: tool_calls only on assistant messages (ours), never
//     an empty array, each call with an id, type "function" and a function
//     name (reference).
//   - arguments-json: function.arguments is a string holding valid JSON
//     (reference: "The arguments … in JSON format"; servers that render the
//     history through a chat template parse it, sgl-project/sglang#28035;
//     wording ours).
//   - duplicate-call-id: tool_call ids are unique in the request (wording
//     ours). duplicate-answer: no two tool messages answer one id
//     ("Duplicate value for 'tool_call_id'", agno-agi/agno#5116).
//   - tool-without-call: a tool message has a tool_call_id that is a call of
//     the nearest preceding assistant message, with only tool messages in
//     between ("messages with role 'tool' must be a response to a preceeding
//     message with 'tool_calls'", param "messages.[N].role",
//     miurla/morphic#136).
//   - call-without-answer: every call of an assistant message is answered
//     before the next user, assistant, system or developer message, or the
//     end ("An assistant message with 'tool_calls' must be followed by tool
//     messages responding to each 'tool_call_id'. The following
//     tool_call_ids did not have response messages: …",
//     router-for-me/CLIProxyAPI#2798).
//   - tool-type: each tool is {"type": "function", "function": {…}}
//     (reference). tool-name: function names match ^[a-zA-Z0-9_-]{1,64}$
//     (reference: "a-z, A-Z, 0-9, or contain underscores and dashes, with a
//     maximum length of 64"; "string does not match pattern",
//     run-llama/llama_index#16093). tool-schema: parameters, when given,
//     compile as JSON Schema (draft 2020-12) with "type": "object" at the
//     top ("Invalid schema for function …: schema must be a JSON Schema of
//     'type: \"object\"'", browserbase/stagehand#1159).
//   - field-type: stream, stream_options, max_tokens, name, tool_call_id
//     and the like have their documented JSON types ("Invalid type for …").
//
// Anthropic Messages (CheckAnthropic); paths in messages are the API's,
// "messages.3.content.1":
//   - json: the body is a JSON object (wording ours).
//   - model and max-tokens: model is a non-empty string and max_tokens an
//     integer ≥ 1 (reference: both required; "max_tokens: Field required",
//     tickernelz/opencode-mem#50).
//   - system: the system prompt is a top-level string or array of non-empty
//     text blocks (reference); a "system" role in messages is a role error.
//   - messages: a non-empty array ("messages: at least one message is
//     required").
//   - role, first-user, alternation: roles are user or assistant, the first
//     is user, and they alternate (reference; "messages: roles must
//     alternate between \"user\" and \"assistant\", but found multiple
//     \"user\" roles in a row", FlowiseAI/Flowise#2006,
//     modelcontextprotocol/quickstart-resources#20).
//   - empty-content: content is a non-empty string or a non-empty array of
//     blocks, except in a final assistant message ("all messages must have
//     non-empty content except for the optional final assistant message",
//     anthropics/claude-code#4416). content-type: content or a block of
//     another shape.
//   - empty-text: text blocks, including those inside a tool_result, are
//     not empty nor whitespace only ("messages: text content blocks must be
//     non-empty", anthropics/claude-code#53473; "must contain non-whitespace
//     text", anthropics/claude-code#23352).
//   - block-role: tool_use blocks only in assistant messages, tool_result
//     blocks only in user messages (reference; wording ours).
//   - tool-call-shape: a tool_use has an id matching ^[a-zA-Z0-9_-]+$
//     (CommandCodeAI/command-code#323), a name, and an object input
//     (reference). duplicate-call-id: tool_use ids are unique in the request
//     ("`tool_use` ids must be unique", anthropics/claude-code#21317).
//   - call-without-answer: every tool_use of an assistant message is
//     answered by a tool_result in the very next message ("`tool_use` ids
//     were found without `tool_result` blocks immediately after",
//     anthropics/claude-code#1577).
//   - results-first: in that message the tool_result blocks come before
//     any other block ("Did not find N `tool_result` block(s) at the
//     beginning of this message", anthropics/claude-code#37).
//   - tool-without-call: a tool_result answers a tool_use of the message
//     just before ("`tool_result` block(s) provided when previous message
//     does not have any `tool_use` blocks"; "unexpected `tool_use_id` found
//     in `tool_result` blocks", anthropics/claude-code#13460).
//   - tools-required: a request with tool_use or tool_result blocks defines
//     tools ("Requests which include `tool_use` or `tool_result` blocks
//     must define tools.", as reported in issue #23).
//   - tool-name: custom tool names match ^[a-zA-Z0-9_-]{1,64}$ (reference;
//     "tools.N.custom.name: String should match pattern",
//     apify/tester-mcp-client#11). tool-schema: input_schema is present,
//     has "type": "object" and compiles as JSON Schema draft 2020-12
//     ("input_schema.type: Field required", Kilo-Org/kilocode#12238; "JSON
//     schema is invalid. It must match JSON Schema draft 2020-12",
//     anthropics/anthropic-sdk-java#241). Server tools (a type other than
//     "custom") are not checked.
//   - field-type: stream, tool_use_id, is_error and the like have their
//     documented JSON types.
package strict
