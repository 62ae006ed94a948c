package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
)

// server is one configured MCP server and its connection.
type server struct {
	cfg config.MCPServer
	env *Env

	// refresh serializes fetching the tool list again.
	refresh sync.Mutex

	mu      sync.Mutex
	state   string // record.MCPReady, MCPFailed, MCPExited, MCPReplayed
	reason  string // why it failed or exited
	failure string // the meta failure of its calls when not ready
	session *sdk.ClientSession
	impl    sdk.Implementation // what the server reported of itself
	proto   string
	tools   []tool.Tool
	byName  map[string]*mcpTool // every tool ever offered, by offered name
	leftOut []string
	stale   bool
	closing bool
	proc    *proc
	// recorded, in a replay, holds the original's results by agent and
	// call id.
	recorded map[callKey]record.ToolResult
	writes   map[callKey][]record.FileDelta // the files each call changed
	blobs    func(ref string) ([]byte, error)
}

// proc is a stdio server's process.
type proc struct {
	done   chan struct{}
	res    sandbox.Result
	err    error
	cancel context.CancelFunc
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// describe says how the process ended: its status and its last stderr line.
func (p *proc) describe() string {
	s := fmt.Sprintf("exit status %d", p.res.ExitCode)
	switch {
	case p.err != nil:
		s = p.err.Error()
	case p.res.ExitCode > 128:
		s = fmt.Sprintf("killed by signal %d", p.res.ExitCode-128)
	}
	if last := lastLine(string(p.res.Stderr)); last != "" {
		s += ": " + clip(last, 300)
	}
	return s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// start connects to the server and lists its tools within its startup
// timeout; on failure the server is left failed, with the reason.
func (s *server) start(ctx context.Context) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Startup())
	defer cancel()
	err := s.connect(ctx)
	if err == nil {
		err = s.list(ctx)
	}
	if err != nil {
		reason := s.startError(ctx, err)
		s.stop()
		s.mu.Lock()
		s.state, s.reason, s.failure = record.MCPFailed, reason, "not_started"
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		s.state = record.MCPReady
		s.mu.Unlock()
	}
	s.note(time.Since(begin))
}

// startError says why starting failed, in words the user can act on.
func (s *server) startError(ctx context.Context, err error) string {
	if p := s.proc; p != nil {
		select { // a process that died says why; give it a moment to be reaped
		case <-p.done:
			return "it exited before answering (" + p.describe() + ")"
		case <-time.After(time.Second):
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("it did not start and list its tools within its startup_timeout of %s (raise startup_timeout in its entry)", s.cfg.Startup())
	}
	return clip(oneLine(err.Error()), 500)
}

// connect starts the process (stdio) or reaches the endpoint (HTTP) and
// opens the MCP session.
func (s *server) connect(ctx context.Context) error {
	var t sdk.Transport
	var err error
	if s.cfg.Transport() == "http" {
		t, err = s.httpTransport()
	} else {
		t, err = s.stdioTransport()
	}
	if err != nil {
		return err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "apodex", Version: s.env.Version}, &sdk.ClientOptions{
		Logger:                 slog.New(slog.DiscardHandler),
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.markStale() },
	})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.session = cs
	if ir := cs.InitializeResult(); ir != nil {
		s.proto = ir.ProtocolVersion
		if ir.ServerInfo != nil {
			s.impl = *ir.ServerInfo
		}
	}
	s.mu.Unlock()
	go s.watch(cs)
	return nil
}

// watch notes a connection that ended while the server was in use: a
// process that exited, or a broken stream (invalid JSON-RPC).
func (s *server) watch(cs *sdk.ClientSession) {
	err := cs.Wait()
	s.mu.Lock()
	if s.closing || s.state != record.MCPReady {
		s.mu.Unlock()
		return
	}
	p := s.proc
	s.mu.Unlock()
	failure, reason := "exited", "the connection ended"
	switch {
	case p != nil:
		select {
		case <-p.done:
			reason = "it exited (" + p.describe() + ")"
		case <-time.After(2 * time.Second):
			failure, reason = "invalid_response", "it sent what is not valid JSON-RPC"
			if err != nil {
				reason += " (" + clip(oneLine(err.Error()), 300) + ")"
			}
			reason += "; the connection was closed and the process stopped"
			p.cancel()
		}
	case err != nil:
		reason = "the connection ended: " + clip(oneLine(err.Error()), 300)
	}
	s.mu.Lock()
	s.state, s.reason, s.failure = record.MCPExited, reason, failure
	s.mu.Unlock()
	s.note(0)
}

// httpTransport reaches a streamable HTTP server, with its headers.
func (s *server) httpTransport() (sdk.Transport, error) {
	c := s.cfg
	url := c.URL
	var err error
	if c.Expand {
		if url, err = config.ExpandEnv(url, s.env.getenv); err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
	}
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		v := c.Headers[k]
		if c.Expand {
			if v, err = config.ExpandEnv(v, s.env.getenv); err != nil {
				return nil, fmt.Errorf("header %s: %w", k, err)
			}
		}
		h.Set(k, v)
	}
	for _, k := range slices.Sorted(maps.Keys(c.EnvHeaders)) {
		v := s.env.getenv(c.EnvHeaders[k])
		if v == "" {
			return nil, fmt.Errorf("env_http_headers %s: the variable %s is not set", k, c.EnvHeaders[k])
		}
		h.Set(k, v)
	}
	if c.BearerTokenEnvVar != "" {
		tok := s.env.getenv(c.BearerTokenEnvVar)
		if tok == "" {
			return nil, fmt.Errorf("bearer_token_env_var: the variable %s is not set", c.BearerTokenEnvVar)
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	client := &http.Client{Transport: headerTransport{base: http.DefaultTransport, h: h}}
	return &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client, MaxRetries: 2}, nil
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// list fetches the server's tools and makes the ones offered.
func (s *server) list(ctx context.Context) error {
	s.mu.Lock()
	cs := s.session
	s.mu.Unlock()
	var all []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		all = append(all, t)
	}
	var tools []tool.Tool
	var leftOut []string
	taken := map[string]string{}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string]*mcpTool{}
	}
	for _, t := range all {
		why := ""
		name := ToolName(s.cfg.Name, t.Name)
		switch {
		case len(s.cfg.EnabledTools) > 0 && !slices.Contains(s.cfg.EnabledTools, t.Name):
			why = "not in enabled_tools"
		case slices.Contains(s.cfg.DisabledTools, t.Name):
			why = "in disabled_tools"
		case taken[name] != "":
			why = fmt.Sprintf("its name %s is taken by the tool %q", name, taken[name])
		}
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			raw = nil
		}
		var compiled = (*mcpTool)(nil)
		if why == "" {
			sch, err := compileSchema(raw)
			if err != nil {
				why = err.Error()
			} else {
				compiled = &mcpTool{srv: s, name: name, tool: t.Name, desc: t.Description, schema: raw, compiled: sch}
			}
		}
		if why != "" {
			leftOut = append(leftOut, t.Name+": "+why)
			continue
		}
		taken[name] = t.Name
		if old, ok := s.byName[name]; ok && old.tool == t.Name {
			old.update(compiled) // the same tool keeps its identity across a refresh
			compiled = old
		}
		s.byName[name] = compiled
		tools = append(tools, compiled)
	}
	s.tools, s.leftOut = tools, leftOut
	return nil
}

func (s *server) markStale() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

// members are the tools offered now; after the server said its list
// changed, it is fetched again first (and the new list recorded).
func (s *server) members() []tool.Tool {
	s.mu.Lock()
	stale := s.stale && s.state == record.MCPReady
	s.mu.Unlock()
	if stale {
		s.refreshTools()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == record.MCPFailed {
		return nil
	}
	return s.tools
}

func (s *server) refreshTools() {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	s.mu.Lock()
	if !s.stale {
		s.mu.Unlock()
		return
	}
	s.stale = false
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Startup())
	defer cancel()
	if err := s.list(ctx); err != nil {
		s.env.warn(fmt.Sprintf("MCP server %s said its tools changed, but listing them again failed (%v); its previous tools stay offered", s.cfg.Name, err))
		return
	}
	s.mu.Lock()
	s.state = record.MCPReady
	s.mu.Unlock()
	s.noteState(record.MCPToolsChanged, 0)
}

// stop ends the session and the process: stdin closed first, then killed
// if it does not exit within a moment.
func (s *server) stop() {
	s.mu.Lock()
	s.closing = true
	cs, p := s.session, s.proc
	s.mu.Unlock()
	if cs != nil {
		done := make(chan struct{})
		go func() { cs.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	}
	if p != nil {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
		p.cancel()
		<-p.done
	}
}

// note records the server's state.
func (s *server) note(d time.Duration) {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	s.noteState(st, d)
}

func (s *server) noteState(state string, d time.Duration) {
	ev := s.event(state)
	ev.DurationMS = d.Milliseconds()
	if s.env.Log != nil && len(ev.Tools) > 0 {
		var specs []record.MCPTool
		s.mu.Lock()
		for _, t := range s.tools {
			mt := t.(*mcpTool)
			specs = append(specs, record.MCPTool{Name: mt.name, Tool: mt.tool, Description: mt.desc, InputSchema: mt.schema})
		}
		s.mu.Unlock()
		if raw, err := json.Marshal(specs); err == nil {
			ev.ToolsRef, _ = s.env.Log.PutBlob(raw)
		}
	}
	s.env.gate.do(func() {
		if s.env.Log != nil {
			s.env.Log.Append(record.TypeMCPServer, "", ev)
		}
		for _, lo := range ev.LeftOut {
			chosen := strings.HasSuffix(lo, ": not in enabled_tools") || strings.HasSuffix(lo, ": in disabled_tools")
			if !chosen && (state == record.MCPReady || state == record.MCPToolsChanged) {
				s.env.warn(fmt.Sprintf("MCP server %s: tool %s; it is not offered", s.cfg.Name, lo))
			}
		}
		if state == record.MCPFailed || state == record.MCPExited {
			s.env.warn(fmt.Sprintf("MCP server %s %s: %s", s.cfg.Name, map[string]string{record.MCPFailed: "did not start", record.MCPExited: "stopped"}[state], ev.Error))
		}
	})
}

// event is the server's mcp_server event: its configuration as written
// (no secret) and what it reported.
func (s *server) event(state string) record.MCPServer {
	c := s.cfg
	ev := record.MCPServer{Name: c.Name, State: state, Transport: c.Transport(), Command: c.Command, Args: c.Args, Cwd: c.Cwd,
		URL: c.URL, EnvKeys: append(slices.Sorted(maps.Keys(c.Env)), c.EnvVars...), HeaderNames: append(slices.Sorted(maps.Keys(c.Headers)), slices.Sorted(maps.Keys(c.EnvHeaders))...),
		BearerTokenEnvVar: c.BearerTokenEnvVar, Network: c.Network, Planes: c.Planes, Writable: c.Writable}
	if c.Transport() == "stdio" {
		ev.Sandbox = s.sandboxKind()
		if ev.Sandbox == "" {
			ev.Sandbox = "unavailable"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ev.ServerName, ev.ServerVersion, ev.Protocol = s.impl.Name, s.impl.Version, s.proto
	if state != record.MCPFailed {
		for _, t := range s.tools {
			ev.Tools = append(ev.Tools, t.Spec().Name)
		}
	}
	ev.LeftOut = s.leftOut
	if state == record.MCPFailed || state == record.MCPExited {
		ev.Error = s.reason
	}
	return ev
}
