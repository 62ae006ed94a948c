// Package llmtest provides fake model endpoints for tests: an
// OpenAI-compatible Chat Completions server on loopback whose every answer
// is chosen by a Go policy, and which refuses, as the real API does,
// request histories the real API refuses.
//
// Guarantees of the server made by NewOpenAI:
//   - it answers POST <URL>/chat/completions (and GET <URL>/models), its URL
//     ending in /v1. Any other method or path (a sandbox escaping to the
//     host, a client building the wrong URL) fails the test and gets 404;
//   - strict by default: every body is checked with CheckOpenAI before
//     anything else. A body that breaks a rule is answered with the real
//     API's status and error body, is not given to the policy nor numbered,
//     is kept in Violations, and fails the test with t.Errorf naming the
//     rule and the message at fault. Lenient turns the checks off for a
//     test that sends a broken body on purpose;
//   - accepted requests are numbered 0, 1, 2, … in arrival order and the
//     policy is called once per request, under a lock, with that number;
//     Requests returns every decoded body in the same order;
//   - a Turn is answered as the client asked: SSE when the request says
//     "stream": true, one JSON object otherwise. A streamed turn sends the
//     role first, the content in two pieces, then each tool call as a header
//     chunk (index, id, name) followed by its arguments in up to three
//     pieces, the calls of one turn interleaved by index; then a chunk with
//     the finish reason, then — only when stream_options.include_usage is
//     set, as OpenAI does — usage in a final chunk with empty choices, then
//     [DONE];
//   - a Turn with a non-2xx Status is answered with an OpenAI-style error
//     object and its Retry-After header; Body replaces whatever would be
//     written; Hang answers nothing until the client gives up or the test
//     ends;
//   - the server is closed when the test ends.
//
// # Rules
//
// Each rule has a stable name (the Rule* constants). Where the real API's
// wording is known the answer uses it; the sources are the API reference
// ("Create chat completion" and the function-calling guide) and error
// bodies the API returned, as quoted in public issue threads (named below
// as owner/repo#n). Wording marked "ours" is not known and says the same
// thing. CheckAnthropic's rules are listed in its tests.
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
package llmtest
