package mcp

import (
	"context"
	"os"
	"sort"
	"sync"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Env is what the servers of a run start with and answer into.
type Env struct {
	// Runner runs stdio servers (the run's sandbox); nil: no sandbox is
	// available, and only servers that opted out (sandbox = false) start.
	// SandboxKind names it ("bwrap", "native", or "none" for a run without
	// isolation, whose servers then run on the host too).
	Runner      sandbox.Runner
	SandboxKind string
	// Planes maps a plane path ("/inputs", "/workspace", "/outputs") to
	// its host directory, for the servers whose entries name it.
	Planes map[string]string
	// Workspace is the run's planes, for the files a call of a server
	// that may write (writable) changed; nil: none are recorded.
	Workspace *workspace.FS
	// Getenv reads the environment: secrets named by env_vars,
	// bearer_token_env_var, env_http_headers and ${VAR} (nil: os.Getenv).
	Getenv func(string) string
	// Log records the servers' events (nil: nothing is recorded).
	Log *record.Log
	// Cite registers a result's text as evidence and returns its id and
	// footer ("" when not registered); nil: none.
	Cite func(ctx context.Context, source, text string) (id, footer string)
	// Warn tells the user something about a server (recorded as a warning
	// by the caller); nil: nothing.
	Warn func(msg string)
	// ObservationLimit is how much of a result the model reads (0: the
	// tools' default).
	ObservationLimit int
	// Version is Apodex's, sent as the client's.
	Version string
	// Hold keeps the servers' events (and warnings) until Hub.Release: a
	// run starts its servers before its run_started event, which names
	// their tools, and records what they did after it.
	Hold bool

	gate *gate
}

// gate holds the servers' record writes until released, in order.
type gate struct {
	mu    sync.Mutex
	held  bool
	queue []func()
}

func (g *gate) do(f func()) {
	if g == nil {
		f()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.queue = append(g.queue, f)
		return
	}
	f()
}

func (g *gate) release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.queue {
		f()
	}
	g.queue, g.held = nil, false
}

func newGate(hold bool) *gate {
	if !hold {
		return nil
	}
	return &gate{held: true}
}

func (e *Env) getenv(k string) string {
	if e.Getenv == nil {
		return os.Getenv(k)
	}
	return e.Getenv(k)
}

func (e *Env) getenvOr(k, def string) string {
	if v := e.getenv(k); v != "" {
		return v
	}
	return def
}

func (e *Env) warn(msg string) {
	if e.Warn != nil {
		e.Warn(msg)
	}
}

func (e *Env) limit() int {
	if e.ObservationLimit > 0 {
		return e.ObservationLimit
	}
	return tool.DefaultObservationLimit
}

// Hub is the MCP servers of one run. A nil *Hub has no servers.
type Hub struct {
	servers []*server // by name
	gate    *gate
}

// Release writes what the servers held back (Env.Hold) and lets them
// write from now on.
func (h *Hub) Release() {
	if h != nil {
		h.gate.release()
	}
}

// Offered is, per server, the tools offered now: for run_started.
func (h *Hub) Offered() []record.MCPOffered {
	if h == nil {
		return nil
	}
	var out []record.MCPOffered
	for _, s := range h.servers {
		o := record.MCPOffered{Server: s.cfg.Name, Transport: s.cfg.Transport()}
		s.mu.Lock()
		o.State, o.ServerName, o.ServerVersion = s.state, s.impl.Name, s.impl.Version
		s.mu.Unlock()
		for _, t := range s.members() {
			mt := t.(*mcpTool)
			o.Tools = append(o.Tools, record.MCPToolName{Name: mt.name, Tool: mt.tool})
		}
		out = append(out, o)
	}
	return out
}

// Start starts every server at once, each within its startup timeout, and
// returns when all have started or failed (each recorded). Disabled
// servers are left out.
func Start(ctx context.Context, specs []config.MCPServer, env Env) *Hub {
	env.gate = newGate(env.Hold)
	h := &Hub{gate: env.gate}
	for _, c := range specs {
		if !c.Disabled {
			h.servers = append(h.servers, &server{cfg: c, env: &env})
		}
	}
	sort.Slice(h.servers, func(i, j int) bool { return h.servers[i].cfg.Name < h.servers[j].cfg.Name })
	var wg sync.WaitGroup
	for _, s := range h.servers {
		wg.Go(func() { s.start(ctx) })
	}
	wg.Wait()
	return h
}

// Tools are the servers' tools for one agent: a tool.Family per server,
// whose members are the tools it offers now.
func (h *Hub) Tools() []tool.Tool {
	if h == nil {
		return nil
	}
	var out []tool.Tool
	for _, s := range h.servers {
		out = append(out, tool.Family(Prefix+s.cfg.Name, s.members))
	}
	return out
}

// Names are the tools offered now, sorted.
func (h *Hub) Names() []string {
	if h == nil {
		return nil
	}
	var out []string
	for _, s := range h.servers {
		for _, t := range s.members() {
			out = append(out, t.Spec().Name)
		}
	}
	sort.Strings(out)
	return out
}

// Status is one server as `apodex mcp list` and `apodex doctor` show it.
type Status struct {
	record.MCPServer
	// Descriptions are the offered tools' descriptions, by name.
	Descriptions map[string]string
}

// Status describes every server.
func (h *Hub) Status() []Status {
	if h == nil {
		return nil
	}
	var out []Status
	for _, s := range h.servers {
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		ss := Status{MCPServer: s.event(st), Descriptions: map[string]string{}}
		for _, t := range s.members() {
			ss.Descriptions[t.Spec().Name] = t.Spec().Description
		}
		out = append(out, ss)
	}
	return out
}

// Close stops every server (a stdio server's stdin is closed, then it is
// killed if it does not exit) and closes every session.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	var wg sync.WaitGroup
	for _, s := range h.servers {
		wg.Go(s.stop)
	}
	wg.Wait()
}
