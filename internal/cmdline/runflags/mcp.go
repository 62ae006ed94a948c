package runflags

import (
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/config"
)

// MCPConfigFlag registers --mcp-config (a project's .mcp.json).
func MCPConfigFlag(fs *cmdline.FlagSet) *string {
	return fs.String("mcp-config", "", "MCP servers from a project's .mcp.json (Claude Code's {\"mcpServers\": {…}}), added to the config files' [mcp_servers.NAME]")
}

// MCPServers are the MCP servers configured here: the config files'
// [mcp_servers.NAME] (top level, then the selected profile's), then the
// servers of --mcp-config; a later one replaces a server of the same name.
func MCPServers(home, profile, mcpConfig string) (map[string]config.MCPServer, error) {
	var files []config.File
	for _, p := range config.Paths(cmdline.HomeDir(home), os.Getenv) {
		f, err := config.Load(p)
		if err != nil {
			return nil, cmdline.Usagef("%v", err)
		}
		files = append(files, f)
	}
	r, err := config.Resolve(config.Input{Files: files, Profile: profile, Getenv: os.Getenv})
	if err != nil {
		return nil, cmdline.Usagef("%v", err)
	}
	var extra map[string]config.MCPServer
	if mcpConfig != "" {
		if extra, err = config.MCPConfig(mcpConfig); err != nil {
			return nil, cmdline.Usagef("%v", err)
		}
	}
	return config.ResolveMCP(files, r.Profile, extra), nil
}

// ChooseMCP picks the servers a run gets: those the task names (each must
// be configured: exit 2 naming it, and named it starts even when its entry
// says enabled = false), else every enabled one.
func ChooseMCP(all map[string]config.MCPServer, named []string, where string) ([]config.MCPServer, error) {
	if len(named) == 0 {
		var out []config.MCPServer
		for _, n := range slices.Sorted(maps.Keys(all)) {
			if !all[n].Disabled {
				out = append(out, all[n])
			}
		}
		return out, nil
	}
	var out []config.MCPServer
	for _, n := range named {
		s, ok := all[n]
		if !ok {
			known := "none is configured"
			if len(all) > 0 {
				known = "configured: " + strings.Join(slices.Sorted(maps.Keys(all)), ", ")
			}
			return nil, cmdline.Usagef("%s names the MCP server %q, which is not configured (%s): add [mcp_servers.%s] to config.toml or pass --mcp-config with it", where, n, known, n)
		}
		s.Disabled = false
		out = append(out, s)
	}
	return out, nil
}

// RunMCP is the servers `apodex run` starts: the task's choice (named)
// among the configured ones, else all of them.
func RunMCP(f Flags, profile string, named []string) ([]config.MCPServer, error) {
	all, err := MCPServers(f.Home, profile, *f.MCPConfig)
	if err != nil {
		return nil, err
	}
	return ChooseMCP(all, named, "the task file")
}
