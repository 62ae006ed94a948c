// Package anthropic is an llm.Model for Anthropic's Messages API
// (POST {BaseURL}/v1/messages), streamed or not.
//
// Guarantees:
//   - One Generate is one HTTP request; nothing is retried here (wrap the
//     client with llm.WithRetry). A non-2xx answer is an *llm.APIError, an
//     unreachable endpoint an *llm.ConnError, and an ended context an error
//     wrapping ctx.Err(). The API key never appears in an error. The caller
//     on ctx (llm.WithCaller) is sent as the X-Apodex-Run, X-Apodex-Agent and
//     X-Apodex-Role headers.
//   - Streamed and non-streamed calls yield the same llm.Response. A stream
//     that ends before message_stop fails with llm.ErrTruncated; an "error"
//     event mid-stream is an *llm.APIError carrying the status Anthropic uses
//     for that error type (overloaded_error => 529), so it retries alike.
//   - Conversation mapping: system messages become the top-level "system"
//     string, joined by blank lines. The history is repaired first
//     (llm.Repair). Consecutive messages of one role become one message, so
//     roles alternate and a turn's results come together, results first.
//     Tool-call arguments that are not a JSON object are sent as
//     {"_raw": "<text>"} so nothing is lost. Empty and whitespace-only text
//     is left out (the API rejects empty text blocks); a conversation that
//     would start with the assistant gets a short user message first.
//   - Reply content the runtime has no type for (thinking, server tools,
//     citations) is ignored; unknown stream events are skipped.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

const (
	defaultBaseURL   = "https://api.anthropic.com"
	apiVersion       = "2023-06-01"
	defaultMaxTokens = 4096
	// maxErrorMessage bounds APIError.Message; maxErrorBody bounds what is
	// read of an error body to find it.
	maxErrorMessage = 500
	maxErrorBody    = 64 << 10
	maxRetryAfter   = 24 * time.Hour
)

// Config configures a Client. Only Model (or Request.Model) is required.
type Config struct {
	// BaseURL defaults to https://api.anthropic.com. "/v1/messages" is
	// appended, or only "/messages" when it already ends in "/v1".
	BaseURL string
	// APIKey is sent as the x-api-key header; empty sends none.
	APIKey string
	// Model is used when Request.Model is empty.
	Model string
	// Stream asks for a server-sent-event stream.
	Stream bool
	// MaxOutputTokens is max_tokens when the request sets none; default 4096
	// (the API requires one).
	MaxOutputTokens int
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// Client calls the Messages API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	url  string
	http *http.Client
	// now is the clock for HTTP-date Retry-After hints.
	now func() time.Time
}

var _ llm.Model = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) *Client {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{cfg: cfg, url: endpoint(cfg.BaseURL), http: hc, now: time.Now}
}

// endpoint builds the messages URL from a base URL.
func endpoint(base string) string {
	base = strings.TrimRight(base, "/")
	if base == "" {
		base = defaultBaseURL
	}
	if strings.HasSuffix(base, "/v1") {
		return base + "/messages"
	}
	return base + "/v1/messages"
}

// Body is the JSON body Generate would send for req: for tests that check
// requests against the API's rules without a server.
func (c *Client) Body(req *llm.Request) ([]byte, error) { return c.encodeRequest(req) }

// Generate sends req and returns the whole assistant turn.
func (c *Client) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	body, err := c.encodeRequest(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("anthropic: build request for %s: %w", c.url, err)
	}
	hreq.Header.Set("content-type", "application/json")
	hreq.Header.Set("anthropic-version", apiVersion)
	if c.cfg.APIKey != "" {
		hreq.Header.Set("x-api-key", c.cfg.APIKey)
	}
	if c.cfg.Stream {
		hreq.Header.Set("accept", "text/event-stream")
	}
	llm.SetCallerHeaders(ctx, hreq.Header)

	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("anthropic: %w", ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already in ConnError
		}
		return nil, &llm.ConnError{URL: c.url, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.apiError(resp)
	}

	var out *llm.Response
	if c.cfg.Stream && !isJSON(resp.Header.Get("content-type")) {
		out, err = decodeStreamTo(resp.Body, c.url, llm.TextTo(ctx))
	} else {
		// Also taken when a proxy ignores "stream" and answers plain JSON.
		out, err = decodeMessage(resp.Body, c.url)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("anthropic: %w", ctx.Err())
		}
		var api *llm.APIError
		if errors.As(err, &api) {
			api.Message = c.redact(api.Message)
		}
		return nil, err
	}
	if out.Model == "" {
		out.Model = c.model(req)
	}
	return out, nil
}

func (c *Client) model(req *llm.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return c.cfg.Model
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// apiError turns a non-2xx response into an *llm.APIError.
func (c *Client) apiError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := strings.TrimSpace(string(raw))
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error.Message != "" {
		msg = env.Error.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	if msg == "" {
		msg = "no error message"
	}
	api := &llm.APIError{
		StatusCode: resp.StatusCode,
		URL:        c.url,
		Message:    cut(c.redact(msg), maxErrorMessage),
		RetryAfter: retryAfter(resp.Header.Get("retry-after"), c.now()),
		Code:       env.Error.Type,
	}
	return api.Classify("")
}

// redact removes the API key from text a server might echo back.
func (c *Client) redact(s string) string {
	if c.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.APIKey, "[redacted]")
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// retryAfter parses a Retry-After value: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsNaN(secs) {
			return 0
		}
		// Clamp so absurd hints cannot overflow a Duration.
		return time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// errorStatus is the HTTP status Anthropic documents for an error type, so
// an error event mid-stream retries like the same error before the stream.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	default: // api_error and anything new: a server-side failure
		return http.StatusInternalServerError
	}
}
