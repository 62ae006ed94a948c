package llm

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Overflow is what a provider said when it refused a prompt for being longer
// than the model's context window. Limit and Prompt are the figures the
// message named (0 when it named none).
type Overflow struct {
	// Limit is the model's context window in tokens, as the provider said.
	Limit int
	// Prompt is the size the provider measured for the refused request.
	Prompt int
}

// The shapes of "the prompt is too long" that providers document or are
// known to send (each is matched case-insensitively on the error message,
// and codes on the error's code or type):
//   - OpenAI: HTTP 400, code "context_length_exceeded", "This model's maximum
//     context length is 8192 tokens. However, your messages resulted in
//     9000 tokens."
//   - vLLM (OpenAI-compatible server): HTTP 400, "This model's maximum context
//     length is 4096 tokens. However, you requested 5000 tokens (4000 in the
//     messages, 1000 in the completion)."; newer versions: "... is longer than
//     the maximum model length of 4096".
//   - llama.cpp server: HTTP 400, type "exceed_context_size_error", "the request
//     exceeds the available context size, try increasing it", with n_ctx and
//     n_prompt_tokens in the error object.
//   - Anthropic Messages API: HTTP 400 invalid_request_error, "prompt is too
//     long: 210000 tokens > 200000 maximum"; a body over the request size
//     limit is HTTP 413 request_too_large.
//   - Others (Ollama's OpenAI-compatible API, LM Studio, SGLang, proxies):
//     "context length", "context window", "too many tokens" in a 400 or 413.
var (
	overflowCodes = []string{"context_length_exceeded", "exceed_context_size_error", "string_above_max_length", "request_too_large"}
	overflowTexts = []string{
		"maximum context length", "context length exceeded", "context_length_exceeded",
		"prompt is too long", "exceeds the available context size", "exceed_context_size",
		"longer than the maximum model length", "context window", "too many tokens",
		"input is too long", "reduce the length of the messages", "prompt too long",
	}
	limitRes = []*regexp.Regexp{
		regexp.MustCompile(`maximum context length is (\d+)`),
		regexp.MustCompile(`maximum model length of (\d+)`),
		regexp.MustCompile(`(\d+) tokens > (\d+) maximum`),
		regexp.MustCompile(`"?n_ctx"?\s*[:=]\s*(\d+)`),
		regexp.MustCompile(`context (?:window|size|length) (?:of|is) (\d+)`),
	}
	promptRes = []*regexp.Regexp{
		regexp.MustCompile(`resulted in (\d+) tokens`),
		regexp.MustCompile(`you requested (\d+) tokens \((\d+) in the messages`),
		regexp.MustCompile(`prompt is too long: (\d+) tokens`),
		regexp.MustCompile(`"?n_prompt_tokens"?\s*[:=]\s*(\d+)`),
	}
)

// DetectOverflow reports whether an error answer (HTTP status, the error's
// code or type, and its message or whole body) says the prompt is too long
// for the model's context window, and the figures it named.
func DetectOverflow(status int, code, message string) (Overflow, bool) {
	if status != 400 && status != 413 && status != 422 {
		return Overflow{}, false
	}
	low := strings.ToLower(message)
	hit := false
	for _, c := range overflowCodes {
		if strings.EqualFold(code, c) || (c != "request_too_large" && strings.Contains(low, c)) {
			hit = true
		}
	}
	for _, t := range overflowTexts {
		if strings.Contains(low, t) {
			hit = true
		}
	}
	if !hit {
		return Overflow{}, false
	}
	var o Overflow
	for _, re := range limitRes {
		if m := re.FindStringSubmatch(low); m != nil {
			o.Limit, _ = strconv.Atoi(m[len(m)-1])
			break
		}
	}
	for _, re := range promptRes {
		if m := re.FindStringSubmatch(low); m != nil {
			o.Prompt, _ = strconv.Atoi(m[len(m)-1])
			break
		}
	}
	return o, true
}

// IsContextOverflow reports whether err is a provider's refusal of a prompt
// longer than the context window, and what it said.
func IsContextOverflow(err error) (Overflow, bool) {
	var api *APIError
	if errors.As(err, &api) && api.Overflow != nil {
		return *api.Overflow, true
	}
	return Overflow{}, false
}
