// Package doctor checks what a run depends on, before a run finds out: the
// sandbox backends, the tools agents call, the home directory and a model
// endpoint. Each check says ok, warn, fail or skip, and every problem comes
// with the fix.
//
// Guarantees:
//   - checks only read, except two that must act to know: the sandbox probe
//     (runs `true` in a throwaway bwrap sandbox and in fresh namespaces) and
//     the home check (creates and removes one file);
//   - the endpoint probe makes at most one listing request and one model
//     call, bounded by the caller's context;
//   - Failed is true when any check failed; warnings never fail.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
)

// Check statuses.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
	Skip = "skip"
)

// Check is one finding.
type Check struct {
	Group  string `json:"group"` // sandbox, tools, home, endpoint
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

// Failed reports whether any check failed.
func Failed(cs []Check) bool {
	return slices.ContainsFunc(cs, func(c Check) bool { return c.Status == Fail })
}

// Tools are the programs under /usr/bin agents rely on (the sandbox binds
// /usr read-only; the system prompt promises a POSIX userland).
var Tools = []string{"bash", "sh", "awk", "sed", "grep", "find", "sort", "head", "tail", "wc", "cat", "diff", "python3"}

// ToolChecks looks for each tool.
func ToolChecks() []Check {
	var missing []string
	for _, t := range Tools {
		if _, err := os.Stat(filepath.Join("/usr/bin", t)); err != nil {
			if _, err := exec.LookPath(t); err != nil {
				missing = append(missing, t)
			}
		}
	}
	if len(missing) == 0 {
		return []Check{{Group: "tools", Name: "/usr/bin", Status: OK, Detail: strings.Join(Tools, " ")}}
	}
	return []Check{{Group: "tools", Name: "/usr/bin", Status: Warn, Detail: "missing: " + strings.Join(missing, " "),
		Fix: "install them (Debian/Ubuntu: apt-get install -y " + strings.Join(missing, " ") + "); agents' commands that use them will fail"}}
}

// HomeCheck checks that runs can be written under home.
func HomeCheck(home string) Check {
	c := Check{Group: "home", Name: home}
	runs := filepath.Join(home, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), "pass --home DIR (or set APODEX_HOME) to a writable directory"
		return c
	}
	f, err := os.CreateTemp(runs, ".doctor-*")
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, "not writable: "+err.Error(), "fix the permissions of "+runs+", or pass --home DIR"
		return c
	}
	f.Close()
	os.Remove(f.Name())
	entries, _ := os.ReadDir(runs)
	c.Status, c.Detail = OK, fmt.Sprintf("writable, %d runs", len(entries))
	return c
}

// Endpoint is a model endpoint to probe.
type Endpoint struct {
	Provider string // openai or anthropic
	BaseURL  string
	Model    string
	APIKey   string
	// Client makes the tool-call probe; it is the client a run would use.
	Client llm.Model
	// HTTP lists models; nil for a client with a 10 s timeout.
	HTTP *http.Client
}

// EndpointChecks probes ep: reachable and the model listed (one GET of the
// model list), then one tool-call request.
func EndpointChecks(ctx context.Context, ep Endpoint) []Check {
	hc := ep.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	reach := Check{Group: "endpoint", Name: "reachable " + ep.BaseURL}
	ids, status, err := listModels(ctx, hc, ep)
	switch {
	case err != nil:
		reach.Status, reach.Detail = Fail, err.Error()
		reach.Fix = "start the server, or check --base-url (it usually ends in /v1 for OpenAI-compatible servers); `curl " + modelsURL(ep) + "` should answer"
		return []Check{reach, {Group: "endpoint", Name: "tool-call probe", Status: Skip, Detail: "the endpoint is unreachable"}}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		reach.Status, reach.Detail = Fail, fmt.Sprintf("HTTP %d: the key was refused", status)
		reach.Fix = "set " + keyVar(ep.Provider) + " to a valid key"
		return []Check{reach}
	}
	reach.Status, reach.Detail = OK, fmt.Sprintf("HTTP %d", status)
	out := []Check{reach}
	listed := Check{Group: "endpoint", Name: "model " + ep.Model}
	switch {
	case status != http.StatusOK:
		listed.Status, listed.Detail = Warn, fmt.Sprintf("the model list answered HTTP %d; cannot tell whether %q is served", status, ep.Model)
	case ep.Model == "":
		listed.Status, listed.Detail, listed.Fix = Fail, "no model named; served: "+strings.Join(ids, ", "), "pass --model NAME (one of the served models)"
	case slices.Contains(ids, ep.Model):
		listed.Status, listed.Detail = OK, "listed by /models"
	case len(ids) == 0:
		listed.Status, listed.Detail = Warn, "the server lists no models"
	default:
		listed.Status, listed.Detail, listed.Fix = Fail, "not served; served: "+strings.Join(clipList(ids, 8), ", "), "pass --model with one of the served names"
	}
	out = append(out, listed)
	return append(out, toolProbe(ctx, ep))
}

// toolProbe asks for one call of a tool and checks that the reply carries
// it as a parseable tool call.
func toolProbe(ctx context.Context, ep Endpoint) Check {
	c := Check{Group: "endpoint", Name: "tool-call probe"}
	if ep.Client == nil {
		c.Status, c.Detail = Skip, "no client"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are a connectivity probe. Answer only by calling a tool."},
			{Role: llm.RoleUser, Content: `Call the tool "report" with {"status": "ok"}.`},
		},
		Tools: []llm.ToolSpec{{Name: "report", Description: "Report the probe's status.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`)}},
		MaxOutputTokens: 200, Agent: "doctor",
	}
	resp, err := ep.Client.Generate(ctx, req)
	if err != nil {
		c.Status = Fail
		c.Detail, c.Fix = probeFailure(err, ep)
		return c
	}
	for _, tc := range resp.Message.ToolCalls {
		var args map[string]any
		if tc.Name == "report" && json.Unmarshal([]byte(tc.Arguments), &args) == nil {
			c.Status, c.Detail = OK, fmt.Sprintf("the server returned a parseable tool call (%s %s)", tc.Name, tc.Arguments)
			return c
		}
	}
	c.Status = Fail
	switch {
	case len(resp.Message.ToolCalls) > 0:
		tc := resp.Message.ToolCalls[0]
		c.Detail = fmt.Sprintf("the tool call is not usable: %s %q", tc.Name, clip(tc.Arguments, 80))
	case strings.Contains(resp.Message.Content, "report") || strings.Contains(resp.Message.Content, "<tool_call>"):
		c.Detail = "the model wrote the call as text, not as a tool call: " + clip(oneLine(resp.Message.Content), 100)
	default:
		c.Detail = "no tool call in the reply: " + clip(oneLine(resp.Message.Content), 100)
	}
	c.Fix = "enable tool calling on the server: vLLM --enable-auto-tool-choice --tool-call-parser NAME; llama.cpp server --jinja; Ollama and LM Studio: a model whose template supports tools"
	return c
}

// probeFailure tells why the tool-call request failed, and what to do: a
// server error, a refused tools field, a model not served, a bad key, a
// stream that is not one, an unreachable server, anything else.
func probeFailure(err error, ep Endpoint) (detail, fix string) {
	msg := oneLine(err.Error())
	var api *llm.APIError
	var bad *llm.BadStreamError
	var conn *llm.ConnError
	switch {
	case errors.As(err, &bad):
		return "the reply is not a server-sent-event stream: " + clip(bad.Line, 80),
			"check --base-url and --provider: the endpoint does not answer as the " + providerName(ep) + " API does"
	case errors.As(err, &conn):
		return msg, "start the server, or check --base-url"
	case errors.As(err, &api):
		low := strings.ToLower(api.Message + " " + api.Code)
		switch s := api.StatusCode; {
		case s >= 500:
			return fmt.Sprintf("the server failed with HTTP %d (a 5xx: the server's own error, not the request): %s", s, clip(oneLine(api.Message), 160)),
				"look at the server's log; run doctor again once it answers"
		case s == 401 || s == 403:
			return fmt.Sprintf("HTTP %d: the key was refused", s), "set " + keyVar(ep.Provider) + " to a valid key"
		case s == 429:
			return "HTTP 429: rate limited or out of quota: " + clip(oneLine(api.Message), 160), "wait, or check the account's quota"
		case s == 404 && (strings.Contains(low, "model") || strings.Contains(low, "not_found")):
			return fmt.Sprintf("the model %q is not served (HTTP 404): %s", ep.Model, clip(oneLine(api.Message), 160)),
				"pass --model with a name the server serves (the model check above lists them)"
		case s == 404:
			return "HTTP 404: no API at this path", "check --base-url (OpenAI-compatible servers usually end in /v1)"
		case strings.Contains(low, "tool"):
			return fmt.Sprintf("the server refused the tools field (HTTP %d): %s", s, clip(oneLine(api.Message), 160)),
				"enable tool calling on the server; see the README's \"Tool calling\" for the flags each server needs"
		default:
			return fmt.Sprintf("the server refused the request (HTTP %d): %s", s, clip(oneLine(api.Message), 160)),
				"check --provider and --model against what the server expects; its log says more"
		}
	}
	return msg, "check --base-url, --provider and --model"
}

func providerName(ep Endpoint) string {
	if ep.Provider == "anthropic" {
		return "Anthropic Messages"
	}
	return "OpenAI-compatible Chat Completions"
}

func listModels(ctx context.Context, hc *http.Client, ep Endpoint) (ids []string, status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, modelsURL(ep), nil)
	if err != nil {
		return nil, 0, err
	}
	if ep.APIKey != "" {
		if ep.Provider == "anthropic" {
			req.Header.Set("x-api-key", ep.APIKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+ep.APIKey)
		}
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := hc.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return nil, 0, fmt.Errorf("unreachable: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &list) == nil {
		for _, d := range list.Data {
			ids = append(ids, d.ID)
		}
	}
	return ids, resp.StatusCode, nil
}

func modelsURL(ep Endpoint) string {
	base := strings.TrimRight(ep.BaseURL, "/")
	if ep.Provider == "anthropic" && !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base + "/models"
}

func keyVar(provider string) string {
	if provider == "anthropic" {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

func clipList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
