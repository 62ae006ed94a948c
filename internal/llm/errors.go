package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors shared by the clients.
var (
	// ErrTruncated: the stream ended before the provider said it was done.
	ErrTruncated = errors.New("llm: stream ended before completion")
	// ErrEmpty: the provider answered with no choice / no content block at all.
	ErrEmpty = errors.New("llm: provider returned an empty response")
	// ErrMalformed: the provider's reply could not be parsed.
	ErrMalformed = errors.New("llm: malformed provider response")
)

// APIError is a non-2xx answer from a provider.
type APIError struct {
	StatusCode int
	// URL is the endpoint that answered, so the user can see what was called.
	URL string
	// Message is the provider's error text, shortened.
	Message string
	// RetryAfter is the provider's Retry-After hint; 0 when absent.
	RetryAfter time.Duration
	// Code is the provider's error code or type, when it sent one
	// ("context_length_exceeded", "invalid_request_error").
	Code string
	// Overflow is set when the answer says the prompt is longer than the
	// model's context window (see DetectOverflow); never retried as is.
	Overflow *Overflow
}

// Classify fills Overflow from the status, Code and Message, and returns e.
// Clients call it on every APIError they build.
func (e *APIError) Classify(body string) *APIError {
	if o, ok := DetectOverflow(e.StatusCode, e.Code, e.Message+"\n"+body); ok {
		e.Overflow = &o
	}
	return e
}

func (e *APIError) Error() string {
	hint := ""
	switch {
	case e.StatusCode == 401 || e.StatusCode == 403:
		hint = " (check the API key: OPENAI_API_KEY or ANTHROPIC_API_KEY)"
	case e.StatusCode == 404:
		hint = " (check --base-url and --model)"
	case e.Overflow != nil:
		hint = " (the prompt is longer than the model's context window)"
	}
	return fmt.Sprintf("llm: %s answered HTTP %d: %s%s", e.URL, e.StatusCode, e.Message, hint)
}

// BadStreamError is a streamed reply that is not a server-sent-event stream
// of JSON events: the endpoint is not the API it was taken for, or a proxy
// in between answers with something else. It matches ErrMalformed.
type BadStreamError struct {
	URL string
	// Line is the first offending bytes, shortened.
	Line string
}

func (e *BadStreamError) Error() string {
	return fmt.Sprintf("llm: the endpoint %s sent a line that is not SSE/JSON: %q (is --base-url an OpenAI-compatible or Anthropic API, and --provider the right one?)", e.URL, e.Line)
}

// Is makes a BadStreamError match ErrMalformed.
func (e *BadStreamError) Is(target error) bool { return target == ErrMalformed }

// NewBadStream returns a BadStreamError quoting at most the first 120 bytes
// of line.
func NewBadStream(url string, line []byte) *BadStreamError {
	const n = 120
	s := string(line)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return &BadStreamError{URL: url, Line: s}
}

// maxBadStreamAttempts bounds the attempts at a call whose replies are not
// streams: the first and two retries (a proxy's hiccup), never six.
const maxBadStreamAttempts = 3

// ConnError is a failure to reach the endpoint at all.
type ConnError struct {
	URL string
	Err error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("llm: cannot reach %s: %v (is the server running? check --base-url)", e.URL, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth another attempt: 408, 409, 429, any
// 5xx, a connection failure, a truncated stream, an empty reply or a reply
// that is not a stream (the last at most twice: see WithRetry).
func IsRetryable(err error) bool {
	var api *APIError
	if errors.As(err, &api) {
		s := api.StatusCode
		return s == 408 || s == 409 || s == 429 || s >= 500
	}
	var conn *ConnError
	if errors.As(err, &conn) {
		return true
	}
	var bad *BadStreamError
	if errors.As(err, &bad) {
		return true
	}
	return errors.Is(err, ErrTruncated) || errors.Is(err, ErrEmpty)
}

// retryAfter returns the provider's hint carried by err, if any.
func retryAfter(err error) time.Duration {
	var api *APIError
	if errors.As(err, &api) {
		return api.RetryAfter
	}
	return 0
}
