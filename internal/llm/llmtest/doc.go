// Package llmtest provides fake model endpoints for tests: an
// OpenAI-compatible Chat Completions server (NewOpenAI) and an Anthropic
// Messages server (NewAnthropic) on loopback, whose every answer is chosen
// by a Go policy, and which refuse, as the real APIs do, request histories
// the real APIs refuse.
//
// Guarantees of both servers:
//   - the OpenAI fake answers POST <URL>/chat/completions (and GET
//     <URL>/models), its URL ending in /v1; the Anthropic fake answers POST
//     <URL>/v1/messages, its URL being the bare root, which the anthropic
//     client takes as BaseURL. Any other method or path (a sandbox escaping
//     to the host, a client building the wrong URL) fails the test and gets
//     404;
//   - strict by default: every body is checked with strict.CheckOpenAI
//     or strict.CheckAnthropic before anything else. A body that breaks a rule is
//     answered with the real API's status and error body, is not given to
//     the policy nor numbered, is kept in Violations, and fails the test
//     with t.Errorf naming the rule and the message at fault. Lenient turns
//     the checks off for a test that sends a broken body on purpose;
//   - accepted requests are numbered 0, 1, 2, … in arrival order and the
//     policy is called once per request, under a lock, with that number;
//     Requests returns every decoded body in the same order, in one neutral
//     shape whichever the API (an Anthropic system prompt becomes a first
//     "system" message, tool_use blocks ToolCalls, each tool_result a "tool"
//     message);
//   - a Turn is answered as the client asked: SSE when the request says
//     "stream": true, one JSON object otherwise. A streamed OpenAI turn sends
//     the role first, the content in two pieces, then each tool call as a
//     header chunk (index, id, name) followed by its arguments in up to three
//     pieces, the calls of one turn interleaved by index; then a chunk with
//     the finish reason, then — only when stream_options.include_usage is
//     set, as OpenAI does — usage in a final chunk with empty choices, then
//     [DONE]. A streamed Anthropic turn sends message_start (input usage),
//     a ping, the text block in two text_delta pieces, each tool_use block
//     with an empty input_json_delta then its arguments in up to three
//     pieces, one block after the other, then message_delta (stop reason,
//     output usage) and message_stop;
//   - a Turn with a non-2xx Status is answered with the API's error object
//     (Anthropic's typed by status: 429 rate_limit_error, 529
//     overloaded_error, …) and its Retry-After header; Body replaces
//     whatever would be written; Hang answers nothing until the client gives
//     up or the test ends;
//   - the server is closed when the test ends.
//
// The rules a body is held to are package strict's.
package llmtest
