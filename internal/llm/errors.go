package llm

import (
	"errors"
	"fmt"
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
}

func (e *APIError) Error() string {
	hint := ""
	switch {
	case e.StatusCode == 401 || e.StatusCode == 403:
		hint = " (check the API key: OPENAI_API_KEY or ANTHROPIC_API_KEY)"
	case e.StatusCode == 404:
		hint = " (check --base-url and --model)"
	}
	return fmt.Sprintf("llm: %s answered HTTP %d: %s%s", e.URL, e.StatusCode, e.Message, hint)
}

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
// 5xx, a connection failure, a truncated stream or an empty reply.
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
