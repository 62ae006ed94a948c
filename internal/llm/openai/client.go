// Package openai is an llm.Model for OpenAI-compatible Chat Completions
// endpoints: OpenAI itself, vLLM, llama.cpp server, Ollama and the like.
//
// Guarantees:
//   - One Generate is one HTTP request; this package never retries (wrap the
//     client in llm.WithRetry for that).
//   - Tool-call arguments are returned exactly as the server sent them, even
//     when they are not valid JSON. Calls without an id get "call_<n>", n being
//     the call's position in the reply.
//   - Errors: a non-2xx answer, or an error object in the reply, is an
//     *llm.APIError naming the URL; failing to reach the server is an
//     *llm.ConnError; a stream that stops before its end wraps llm.ErrTruncated;
//     a reply with no choice wraps llm.ErrEmpty; an unparsable one wraps
//     llm.ErrMalformed. When ctx ends, the error wraps ctx.Err() instead.
//   - The caller on ctx (llm.WithCaller) is sent as the X-Apodex-Run,
//     X-Apodex-Agent and X-Apodex-Role headers.
//   - The API key is sent only in the Authorization header and is scrubbed from
//     any server text placed in an error.
package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

const (
	maxReply      = 64 << 20 // a whole non-streaming reply
	maxErrorBody  = 64 << 10 // what is read of a non-2xx body
	maxMessageLen = 500      // APIError.Message
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, e.g. "http://127.0.0.1:8000/v1";
	// "/chat/completions" is appended. Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when non-empty.
	APIKey string
	// Model is used when Request.Model is empty.
	Model string
	// Stream selects SSE streaming; false asks for one JSON reply.
	Stream bool
	// HTTPClient defaults to a client with dial and TLS timeouts but no overall
	// timeout: the ctx passed to Generate bounds each call.
	HTTPClient *http.Client
}

// Client calls one Chat Completions endpoint. It is safe for concurrent use.
type Client struct {
	url    string
	apiKey string
	model  string
	stream bool
	http   *http.Client
	now    func() time.Time // for Retry-After dates
}

var _ llm.Model = (*Client)(nil)

// New returns a Client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
	}
	return &Client{
		url:    base + "/chat/completions",
		apiKey: cfg.APIKey,
		model:  cfg.Model,
		stream: cfg.Stream,
		http:   hc,
		now:    time.Now,
	}
}

// defaultHTTPClient has the standard dial (30s) and TLS handshake (10s)
// timeouts and no response-header timeout: a non-streaming server may think
// for minutes before its first byte.
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return &http.Client{Transport: t.Clone()}
	}
	return &http.Client{}
}

// Body is the JSON body Generate would send for req: for tests that check
// requests against the API's rules without a server.
func (c *Client) Body(req *llm.Request) ([]byte, error) {
	return json.Marshal(buildRequest(req, c.model, c.stream))
}

// Generate sends req and returns the whole assistant turn.
func (c *Client) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	body, err := json.Marshal(buildRequest(req, c.model, c.stream))
	if err != nil {
		return nil, fmt.Errorf("openai: encoding request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: bad endpoint %q (check --base-url): %w", c.url, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	llm.SetCallerHeaders(ctx, hreq.Header)

	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.statusError(ctx, resp)
	}

	out, err := c.readReply(resp)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("openai: call to %s: %w", c.url, ctx.Err())
		}
		return nil, c.scrub(err)
	}
	return out, nil
}

// readReply parses a 2xx body. In stream mode a body that starts with '{' is a
// plain JSON reply (a server that ignored "stream", or an error object).
func (c *Client) readReply(resp *http.Response) (*llm.Response, error) {
	br := bufio.NewReaderSize(resp.Body, 4<<10) // per request: small, parseStream grows its own buffer
	if c.stream && !startsWithBrace(br) {
		return parseStreamTo(br, c.url, llm.TextTo(resp.Request.Context()))
	}
	body, err := io.ReadAll(io.LimitReader(br, maxReply+1))
	if err != nil {
		return nil, fmt.Errorf("openai: reading reply from %s: %w: %w", c.url, llm.ErrTruncated, err)
	}
	if len(body) > maxReply {
		return nil, fmt.Errorf("openai: %s sent a reply over %d bytes: %w", c.url, maxReply, llm.ErrMalformed)
	}
	return parseResponse(body, c.url, resp.StatusCode)
}

// startsWithBrace skips leading whitespace (harmless in both formats) and
// reports whether the body then starts with '{'.
func startsWithBrace(br *bufio.Reader) bool {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return false
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		_ = br.UnreadByte()
		return b == '{'
	}
}

// transportError classifies a failed round trip.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: call to %s: %w", c.url, ctx.Err())
	}
	// url.Error repeats method and URL; ConnError already names the URL.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &llm.ConnError{URL: c.url, Err: err}
}

// statusError turns a non-2xx answer into an *llm.APIError.
func (c *Client) statusError(ctx context.Context, resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("openai: call to %s: %w", c.url, ctx.Err())
	}
	msg := errorMessage(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	api := &llm.APIError{
		StatusCode: resp.StatusCode,
		URL:        c.url,
		Message:    cut(msg, maxMessageLen),
		RetryAfter: retryAfter(resp.Header, c.now()),
		Code:       errorCode(body),
	}
	return c.scrub(api.Classify(string(body)))
}

// scrub removes the API key from server text carried by an APIError.
func (c *Client) scrub(err error) error {
	var api *llm.APIError
	if c.apiKey != "" && errors.As(err, &api) {
		api.Message = strings.ReplaceAll(api.Message, c.apiKey, "[redacted]")
	}
	return err
}

// retryAfter reads "retry-after-ms" (OpenAI) or "Retry-After" (seconds or an
// HTTP date). 0 when absent or unparsable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
