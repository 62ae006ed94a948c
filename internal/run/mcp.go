package run

import (
	"context"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/mcp"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// mcpNames are the names of the servers a run is given, for its settings.
func mcpNames(servers []config.MCPServer) []string {
	var out []string
	for _, s := range servers {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// resumedMCP is the configured servers a resume starts again: those the
// run recorded, every one of which must be configured (a replay serves
// them from the record instead).
func resumedMCP(id string, recorded []string, cfg Config) ([]config.MCPServer, error) {
	if cfg.MCPFrom != "" {
		return nil, nil
	}
	var out []config.MCPServer
	var missing []string
	for _, n := range recorded {
		i := slices.IndexFunc(cfg.MCP, func(s config.MCPServer) bool { return s.Name == n })
		if i < 0 {
			missing = append(missing, n)
			continue
		}
		out = append(out, cfg.MCP[i])
	}
	if len(missing) > 0 {
		return nil, &ConfigError{fmt.Sprintf("run %s used the MCP server(s) %s, which are not configured here: add [mcp_servers.%s] to the configuration file or pass --mcp-config with it, then resume", id, strings.Join(missing, ", "), missing[0])}
	}
	return out, nil
}

// startMCP starts the run's MCP servers (a replay's come from the
// original record) before any agent runs; their tools join every agent's
// (toolkit.list) and the lead may hand them out. With hold, what they
// record waits for Hub.Release (a new run's run_started goes first). A
// second call does nothing.
func (ss *session) startMCP(ctx context.Context, hold bool) error {
	cfg := ss.cfg
	if ss.mcpOn || len(cfg.MCP) == 0 && cfg.MCPFrom == "" {
		return nil
	}
	ss.mcpOn = true
	kind := ss.sbx.Kind
	if kind == "unavailable" {
		kind = ""
	}
	env := mcp.Env{
		Runner: ss.kit.runner, SandboxKind: kind,
		Planes:    map[string]string{"/inputs": ss.fs.Inputs, "/workspace": ss.fs.Workspace, "/outputs": ss.fs.Outputs},
		Workspace: ss.fs,
		Log:       ss.log,
		Version:   version.Runtime,
		Hold:      hold,
		Cite: func(ctx context.Context, source, text string) (string, string) {
			it, _, err := ss.ev.Registry().Add(llm.CallerFrom(ctx).Agent, evidence.Item{Kind: record.EvidenceMCP, Source: source,
				Span: record.Span{From: 1, To: strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1}, CallID: tool.CallID(ctx)}, text)
			if err != nil {
				return "", ""
			}
			return it.ID, evidence.Footer(it)
		},
		Warn: func(msg string) {
			appendEvent(ss.log, record.TypeWarning, "", record.Warning{Code: "mcp", Message: msg})
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "WARNING: %s\n", msg)
			}
		},
	}
	if cfg.MCPFrom != "" {
		c, err := record.Read(cfg.MCPFrom)
		if err != nil {
			return fmt.Errorf("run: the recorded MCP servers: %w", err)
		}
		h, err := mcp.Recorded(cfg.MCPFrom, c.Events, env)
		if err != nil {
			return fmt.Errorf("run: the recorded MCP servers: %w", err)
		}
		ss.kit.hub = h
		return nil
	}
	ss.kit.hub = mcp.Start(ctx, cfg.MCP, env)
	return nil
}
