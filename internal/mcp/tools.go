package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// mcpTool is one tool of a server, as offered to the model. The same
// object serves a name across refreshes of the list; its definition is
// swapped in place.
type mcpTool struct {
	srv  *server
	name string // offered: mcp__SERVER__TOOL
	tool string // the server's own name

	mu       sync.Mutex
	desc     string
	schema   json.RawMessage
	compiled *jsonschema.Schema
}

var _ tool.Tool = (*mcpTool)(nil)

func (t *mcpTool) update(n *mcpTool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.desc, t.schema, t.compiled = n.desc, n.schema, n.compiled
}

func (t *mcpTool) Spec() llm.ToolSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	desc := t.desc
	if strings.TrimSpace(desc) == "" {
		desc = fmt.Sprintf("The tool %s of the MCP server %s.", t.tool, t.srv.cfg.Name)
	}
	return llm.ToolSpec{Name: t.name, Description: desc, Parameters: t.schema}
}

// Call validates the arguments, calls the server within its tool timeout
// and renders what it answered; every failure is an observation naming the
// server and what happened.
func (t *mcpTool) Call(ctx context.Context, raw json.RawMessage) tool.Result {
	s := t.srv
	if s.recorded != nil {
		return t.replayed(ctx)
	}
	meta := &record.MCPCall{Server: s.cfg.Name, Tool: t.tool}
	fail := func(kind, format string, args ...any) tool.Result {
		meta.Failure = kind
		r := tool.Errorf(format, args...)
		r.Meta = &record.ToolMeta{MCP: meta}
		return tool.Cut(r, s.env.limit())
	}
	s.mu.Lock()
	state, reason, failure, cs := s.state, s.reason, s.failure, s.session
	meta.ServerName, meta.ServerVersion = s.impl.Name, s.impl.Version
	_, offered := s.byName[t.name]
	current := slicesContains(s.tools, t)
	s.mu.Unlock()
	switch {
	case state != record.MCPReady:
		return fail(failure, "MCP server %s is not available: %s. Its tools do not work in this run; go on with your other tools.", s.cfg.Name, reason)
	case !offered || !current:
		return fail("unknown_tool", "MCP server %s no longer offers %s (its tool list changed); see the tools you have now.", s.cfg.Name, t.tool)
	}
	t.mu.Lock()
	compiled, schema := t.compiled, t.schema
	t.mu.Unlock()
	if err := checkArgs(compiled, raw); err != nil {
		return fail("invalid_arguments", "the arguments of %s do not match its input schema: %s; the schema is %s", t.name, err, clip(string(schema), 2000))
	}
	var args map[string]any
	_ = json.Unmarshal(raw, &args)
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Tool())
	defer cancel()
	changes := s.markWrites()
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: t.tool, Arguments: args})
	deltas := changes()
	if err != nil {
		if ctx.Err() != nil { // the run was cancelled or timed out: not the server's doing
			return fail("cancelled", "the call of %s was cancelled: %v", t.name, context.Cause(ctx))
		}
		kind, msg := s.callFailure(cctx, err)
		return fail(kind, "MCP server %s: %s", s.cfg.Name, msg)
	}
	text := render(res)
	meta.Bytes = len(text)
	text = capResult(text)
	if res.IsError {
		meta.Failure = "tool_error"
		r := tool.Result{Output: fmt.Sprintf("error: the MCP tool %s (server %s) reported an error:\n%s", t.tool, s.cfg.Name, text), IsError: true,
			Meta: &record.ToolMeta{MCP: meta}, Deltas: deltas, Observed: true}
		return tool.Cut(r, s.env.limit())
	}
	r := t.finish(ctx, text, meta)
	r.Deltas, r.Observed = deltas, true
	return r
}

// markWrites starts watching the workspace when the server may write it,
// and returns what gives the files changed since: the call's deltas, as
// a command's (observed, so a parallel call's exact deltas win).
func (s *server) markWrites() func() []tool.FileDelta {
	if len(s.cfg.Writable) == 0 || s.env.Workspace == nil {
		return func() []tool.FileDelta { return nil }
	}
	m, err := s.env.Workspace.Mark(workspace.Workspace)
	if err != nil {
		return func() []tool.FileDelta { return nil }
	}
	return func() []tool.FileDelta {
		d, _ := s.env.Workspace.Since(m)
		return d
	}
}

// finish gives a result's text its evidence id (the footer is its last
// line) and cuts it to the observation limit.
func (t *mcpTool) finish(ctx context.Context, text string, meta *record.MCPCall) tool.Result {
	s := t.srv
	if s.env.Cite != nil && strings.TrimSpace(text) != "" {
		if id, footer := s.env.Cite(ctx, "mcp:"+s.cfg.Name+"/"+t.tool, text); footer != "" {
			meta.Evidence = id
			text += "\n" + footer
		}
	}
	return tool.Cut(tool.Result{Output: text, Meta: &record.ToolMeta{MCP: meta}}, s.env.limit())
}

// codeRejected is the SDK's code for a message its transport could not
// deliver (an HTTP endpoint refused, closed or failed).
const codeRejected = -32005

// callFailure classifies a failed call: the server exited, the call timed
// out, the server sent invalid JSON-RPC, or answered a JSON-RPC error.
func (s *server) callFailure(ctx context.Context, err error) (kind, msg string) {
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && wire.Code == codeRejected {
		return "unreachable", "the call failed: " + clip(oneLine(err.Error()), 500)
	}
	if errors.As(err, &wire) {
		return "protocol_error", fmt.Sprintf("it refused the call with JSON-RPC error %d: %s", wire.Code, clip(wire.Message, 500))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout", fmt.Sprintf("no answer within its tool_timeout of %s; the call was cancelled (raise tool_timeout in its entry if it needs longer)", s.cfg.Tool())
	}
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil { // streamable HTTP
		var syn *json.SyntaxError
		if errors.As(err, &syn) || strings.Contains(err.Error(), "invalid character") {
			return "invalid_response", "it answered with what is not valid JSON-RPC (" + clip(oneLine(err.Error()), 300) + ")"
		}
		return "unreachable", "the call failed: " + clip(oneLine(err.Error()), 500)
	}
	// stdio: a broken connection; watch decides whether the process exited
	// or the stream was invalid, within a moment.
	deadline := time.After(3 * time.Second)
	for {
		s.mu.Lock()
		state, reason, failure := s.state, s.reason, s.failure
		s.mu.Unlock()
		if state != record.MCPReady {
			return failure, reason + "; its tools no longer work in this run, go on with your other tools"
		}
		select {
		case <-deadline:
			return "exited", "the call failed: " + clip(oneLine(err.Error()), 500)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func slicesContains(ts []tool.Tool, t *mcpTool) bool {
	for _, x := range ts {
		if x == tool.Tool(t) {
			return true
		}
	}
	return false
}
