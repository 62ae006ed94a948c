package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/doctor"
	"github.com/apodex/apodex/internal/mcp"
	"github.com/apodex/apodex/internal/mcp/serve"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/sandbox"
)

// cmdMCP is `apodex mcp list` (the configured MCP servers, started to see
// their state and tools) and `apodex mcp serve` (Apodex as an MCP server).
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "Usage: apodex mcp list [flags] [NAME...]   the configured MCP servers: each started to show its state, what it reported and its tools")
		fmt.Fprintln(stdout, "       apodex mcp serve [flags]            serve Apodex's runs as MCP tools (stdio, or streamable HTTP with --http)")
		if len(args) == 0 {
			return cmdline.ExitError(cmdline.ExitUsage)
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
	return cmdline.Usagef("apodex mcp %q: use list or serve", args[0])
}

func cmdMCPList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("mcp list", "[flags] [NAME...]", stdout, stderr)
	home := fs.HomeFlag()
	profile := fs.String("profile", "", "the config profile whose [profiles.NAME.mcp_servers] apply (default: $APODEX_PROFILE, else the file's)")
	mcpConfig := runflags.MCPConfigFlag(fs)
	jsonOut := fs.JSONFlag("each server as JSON")
	names, err := fs.Parse(args)
	if err != nil {
		return err
	}
	all, err := runflags.MCPServers(*home, *profile, *mcpConfig)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, "no MCP servers are configured: add [mcp_servers.NAME] to config.toml, or pass --mcp-config .mcp.json")
		return nil
	}
	var servers []config.MCPServer
	if len(names) > 0 {
		if servers, err = runflags.ChooseMCP(all, names, "apodex mcp list"); err != nil {
			return err
		}
	} else {
		for _, n := range slices.Sorted(maps.Keys(all)) {
			servers = append(servers, all[n])
		}
	}
	st := probeMCP(ctx, servers)
	if *jsonOut {
		cmdline.WriteJSON(stdout, st)
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

// cmdMCPServe is `apodex mcp serve`: Apodex as an MCP server another agent
// (Codex CLI, Claude Code, …) delegates long, verifiable jobs to. Over
// stdio by default; with --http over streamable HTTP on a loopback address,
// every request carrying the bearer token. Each run it starts is a process
// of its own (`apodex mcp run-detached`, in a session of its own), with the
// settings of apodex run's flags given to serve and the configuration: it
// goes on when the client disconnects and when the server exits or is
// killed, and stops as any run does (apodex cancel; a signal to it halts it
// resumable).
func cmdMCPServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("mcp serve", "[run flags] [--http 127.0.0.1:PORT [--token T]]   (stdio unless --http)", stdout, stderr)
	addr := fs.String("http", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:7778; port 0 picks one) instead of stdio")
	token := fs.String("token", "", "with --http: the bearer token clients send (default: one is generated and printed)")
	sv, err := newMCPServer(fs, args)
	if err != nil {
		return err
	}
	return sv.Serve(ctx, *addr, *token, stdout, stderr)
}

// newMCPServer parses serve's run flags (fs has serve's own) and the
// configuration; the run flags are kept as given, for the runs' processes.
func newMCPServer(fs *cmdline.FlagSet, args []string) (*serve.Server, error) {
	var f runflags.Flags
	f.Register(fs) // the settings of every run it starts: model, budgets, sandbox, --mcp-config, …
	pos, err := fs.Parse(args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, cmdline.Usagef("unexpected argument %q: apodex mcp serve takes flags only", pos[0])
	}
	given := fs.Given()
	resolved, err := runflags.ApplyConfig(fs, f.Home, f.Model.Profile)
	if err != nil {
		return nil, err
	}
	if err := f.Check(); err != nil {
		return nil, cmdline.Usagef("%v", err)
	}
	if _, _, err := f.Model.Build(); err != nil { // no provider: refused now, not at the first run
		return nil, err
	}
	return serve.New(f, given, resolved.Profile, cmdline.HomeDir(f.Home), runArgsOf(args)), nil
}

// runArgsOf are serve's arguments without its own flags (--http, --token).
func runArgsOf(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(args[i], "-") && (name == "http" || name == "token") {
			if !hasValue {
				i++ // its value
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// cmdMCPRunDetached is `apodex mcp run-detached [serve's run flags]`, the
// process of one run mcp serve started (not for people): it reads the run
// (serve.DetachedRun) on standard input and runs it to its end; a signal
// halts it resumable, as apodex run's.
func cmdMCPRunDetached(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var req serve.DetachedRun
	if err := json.NewDecoder(io.LimitReader(cmdline.Stdin(ctx), 4<<20)).Decode(&req); err != nil {
		return cmdline.Usagef("apodex mcp run-detached reads its run as JSON on standard input (apodex mcp serve starts it): %v", err)
	}
	sv, err := newMCPServer(cmdline.NewFlagSet("mcp run-detached", "[run flags]", stdout, stderr), args)
	if err != nil {
		return err
	}
	cfg, err := sv.RunConfig(req.Args, req.ID)
	if err != nil {
		return err
	}
	cfg.Halt, cfg.HaltNote = cmdline.HaltOf(ctx), "SIGTERM"
	_, err = run.Execute(ctx, cfg)
	if errors.Is(err, run.ErrHalted) {
		return nil
	}
	return err
}
