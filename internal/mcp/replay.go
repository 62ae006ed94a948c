package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// callKey names one call in a record: the agent and its call id.
type callKey struct{ agent, call string }

// Recorded is a replay's hub for the run recorded in dir (its events
// given): each server the record names offers the tools it ever listed,
// and serves every call from the recorded result of the same agent and
// call id, through the same evidence and cut as the original, without
// starting or contacting any server. A call the record has no result for
// is an error observation (the replay then diverges). Each server is
// recorded as state "replayed".
func Recorded(dir string, events []record.Event, env Env) (*Hub, error) {
	env.gate = newGate(env.Hold)
	byName := map[string]*server{}
	deltas := map[callKey][]record.FileDelta{}
	var order []string
	for _, e := range events {
		p, err := record.DecodePayload(e)
		if errors.Is(err, record.ErrUnknownType) {
			continue // written by a newer apodex: nothing this hub serves
		} else if err != nil {
			return nil, err
		}
		switch p := p.(type) {
		case *record.MCPServer:
			ev := *p
			s := byName[ev.Name]
			if s == nil {
				s = &server{cfg: config.MCPServer{Name: ev.Name, Command: ev.Command, Args: ev.Args, URL: ev.URL, Network: ev.Network, Planes: ev.Planes, Writable: ev.Writable},
					env: &env, state: record.MCPReplayed, byName: map[string]*mcpTool{}, recorded: map[callKey]record.ToolResult{}, writes: map[callKey][]record.FileDelta{},
					blobs: func(ref string) ([]byte, error) { return record.ReadBlob(dir, ref) }}
				byName[ev.Name] = s
				order = append(order, ev.Name)
			}
			if ev.ServerName != "" {
				s.impl.Name, s.impl.Version, s.proto = ev.ServerName, ev.ServerVersion, ev.Protocol
			}
			if ev.ToolsRef != "" {
				raw, err := record.ReadBlob(dir, ev.ToolsRef)
				if err != nil {
					return nil, fmt.Errorf("mcp: the tools of server %s (seq %d): %w", ev.Name, e.Seq, err)
				}
				var specs []record.MCPTool
				if err := json.Unmarshal(raw, &specs); err != nil {
					return nil, fmt.Errorf("mcp: the tools of server %s (seq %d): %w", ev.Name, e.Seq, err)
				}
				for _, sp := range specs {
					t := &mcpTool{srv: s, name: sp.Name, tool: sp.Tool, desc: sp.Description, schema: sp.InputSchema}
					if old, ok := s.byName[sp.Name]; ok {
						old.update(t)
						continue
					}
					s.byName[sp.Name] = t
					s.tools = append(s.tools, t)
				}
			}
		case *record.FileDelta: // before its call's result
			k := callKey{e.Agent, p.CallID}
			deltas[k] = append(deltas[k], *p)
		case *record.ToolResult:
			tr := *p
			if tr.Meta == nil || tr.Meta.MCP == nil {
				continue
			}
			if s := byName[tr.Meta.MCP.Server]; s != nil {
				k := callKey{e.Agent, tr.CallID}
				s.recorded[k] = tr
				if len(deltas[k]) > 0 {
					s.writes[k] = deltas[k]
				}
			}
		}
	}
	sort.Strings(order)
	h := &Hub{gate: env.gate}
	for _, n := range order {
		s := byName[n]
		h.servers = append(h.servers, s)
		s.noteState(record.MCPReplayed, 0)
	}
	return h, nil
}

// replayed serves the recorded result of this call.
func (t *mcpTool) replayed(ctx context.Context) tool.Result {
	s := t.srv
	key := callKey{llm.CallerFrom(ctx).Agent, tool.CallID(ctx)}
	tr, ok := s.recorded[key]
	if !ok {
		r := tool.Errorf("the replay has no recorded result of %s for agent %s's call %s: the run went another way here", t.name, key.agent, key.call)
		r.Meta = &record.ToolMeta{MCP: &record.MCPCall{Server: s.cfg.Name, Tool: t.tool, Failure: "not_recorded"}}
		return r
	}
	changes := s.markWrites()
	werr := s.rewrite(s.writes[key])
	deltas := changes()
	if werr != nil {
		r := tool.Errorf("the replay cannot make the files %s wrote: %v", t.name, werr)
		r.Deltas, r.Observed = deltas, true
		return r
	}
	text := tr.Output
	if tr.FullRef != "" {
		raw, err := s.blobs(tr.FullRef)
		if err != nil {
			return tool.Errorf("the replay cannot read the recorded result of %s: %v", t.name, err)
		}
		text = string(raw)
	}
	meta := *tr.Meta.MCP
	if meta.Evidence != "" && !tr.IsError {
		// The footer is the last line: the same text gets its id again.
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i]
		}
		meta.Evidence = ""
		r := t.finish(ctx, text, &meta)
		r.Deltas, r.Observed = deltas, true
		return r
	}
	return tool.Cut(tool.Result{Output: text, IsError: tr.IsError, Meta: &record.ToolMeta{MCP: &meta}, Deltas: deltas, Observed: true}, s.env.limit())
}

// rewrite makes, in a replay, the workspace changes a call of a server
// that may write made in the run: each recorded file written (from its
// kept content) or removed, through an os.Root of the workspace.
func (s *server) rewrite(ds []record.FileDelta) error {
	if len(ds) == 0 {
		return nil
	}
	ws := s.env.Planes["/workspace"]
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range ds {
		rel, ok := strings.CutPrefix(d.Path, "/workspace/")
		if !ok {
			return fmt.Errorf("%s is not in /workspace", d.Path)
		}
		if d.After == "" {
			if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		data := []byte(d.Content)
		if d.ContentRef != "" {
			if data, err = s.blobs(d.ContentRef); err != nil {
				return err
			}
		} else if d.Content == "" && d.Bytes > 0 {
			return fmt.Errorf("the record did not keep the content of %s (%d bytes)", d.Path, d.Bytes)
		}
		if dir := filepath.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := root.WriteFile(rel, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
