package main

import (
	"context"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/doctor"
	"github.com/apodex/apodex/internal/mcp"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
)

// cmdMCP is `apodex mcp list` (the configured MCP servers, started to see
// their state and tools) and `apodex mcp serve` (Apodex as an MCP server).
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "Usage: apodex mcp list [flags] [NAME...]   the configured MCP servers: each started to show its state, what it reported and its tools")
		fmt.Fprintln(stdout, "       apodex mcp serve [flags]            serve Apodex's runs as MCP tools (stdio, or streamable HTTP with --http)")
		if len(args) == 0 {
			return exitError(exitUsage)
		}
		return nil
	}
	switch args[0] {
	case "list":
		return cmdMCPList(ctx, args[1:], stdout, stderr)
	case "serve":
		return cmdMCPServe(ctx, args[1:], stdout, stderr)
	case "run-detached": // a run mcp serve started, in a process of its own
		return cmdMCPRunDetached(ctx, args[1:], stdout, stderr)
	}
	return usagef("apodex mcp %q: use list or serve", args[0])
}

func cmdMCPList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp list", "[flags] [NAME...]", stdout, stderr)
	home := fs.homeFlag()
	profile := fs.String("profile", "", "the config profile whose [profiles.NAME.mcp_servers] apply (default: $APODEX_PROFILE, else the file's)")
	mcpConfig := fs.mcpConfigFlag()
	jsonOut := fs.jsonFlag("each server as JSON")
	names, err := fs.parse(args)
	if err != nil {
		return err
	}
	all, err := mcpServers(*home, *profile, *mcpConfig)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, "no MCP servers are configured: add [mcp_servers.NAME] to config.toml, or pass --mcp-config .mcp.json")
		return nil
	}
	var servers []config.MCPServer
	if len(names) > 0 {
		if servers, err = chooseMCP(all, names, "apodex mcp list"); err != nil {
			return err
		}
	} else {
		for _, n := range slices.Sorted(maps.Keys(all)) {
			servers = append(servers, all[n])
		}
	}
	st := probeMCP(ctx, servers)
	if *jsonOut {
		writeJSON(stdout, st)
		return nil
	}
	for i, s := range st {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printMCP(stdout, s, all[s.Name])
	}
	for _, s := range servers {
		if s.Disabled {
			fmt.Fprintf(stdout, "\n%s  disabled (enabled = false; a task naming it in mcp: starts it)\n", s.Name)
		}
	}
	return nil
}

// probeMCP starts servers as a run would (stdio ones in the best sandbox
// here, without planes), reads their state and tools, and stops them.
func probeMCP(ctx context.Context, servers []config.MCPServer) []mcp.Status {
	env := mcp.Env{Version: version.Runtime}
	if r, err := sandbox.New(sandbox.KindAuto); err == nil {
		env.Runner, env.SandboxKind = r, sandbox.KindOf(r)
	}
	h := mcp.Start(ctx, servers, env)
	defer h.Close()
	return h.Status()
}

func printMCP(w io.Writer, s mcp.Status, c config.MCPServer) {
	where := s.Transport
	if s.Sandbox != "" {
		where += ", sandbox " + s.Sandbox
	}
	reported := ""
	if s.ServerName != "" {
		reported = "  " + s.ServerName + " " + s.ServerVersion
	}
	fmt.Fprintf(w, "%s  %s  (%s; from %s)%s\n", s.Name, s.State, where, c.Source, reported)
	if s.Error != "" {
		fmt.Fprintf(w, "  %s\n", s.Error)
	}
	for _, t := range s.Tools {
		desc, _, _ := strings.Cut(strings.TrimSpace(s.Descriptions[t]), "\n")
		fmt.Fprintf(w, "  %s  %s\n", t, desc)
	}
	for _, lo := range s.LeftOut {
		fmt.Fprintf(w, "  left out: %s\n", lo)
	}
}

// mcpChecks are doctor's checks of the configured servers: each started
// and listed as a run would.
func mcpChecks(ctx context.Context, all map[string]config.MCPServer) []doctor.Check {
	var servers []config.MCPServer
	for _, n := range slices.Sorted(maps.Keys(all)) {
		if !all[n].Disabled {
			servers = append(servers, all[n])
		}
	}
	var out []doctor.Check
	for _, s := range probeMCP(ctx, servers) {
		c := doctor.Check{Group: "mcp", Name: s.Name}
		switch s.State {
		case record.MCPReady:
			c.Status, c.Detail = doctor.OK, fmt.Sprintf("%s %s, %d tools (%s)", s.ServerName, s.ServerVersion, len(s.Tools), s.Transport)
			if len(s.LeftOut) > 0 {
				c.Status, c.Fix = doctor.Warn, "left out: "+strings.Join(s.LeftOut, "; ")
			}
		default:
			c.Status, c.Detail = doctor.Fail, s.Error
			c.Fix = "fix its entry in " + strings.TrimPrefix(all[s.Name].Source, "file ") + " (command/url, env, startup_timeout), or set enabled = false"
		}
		out = append(out, c)
	}
	return out
}
