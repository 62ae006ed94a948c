package run

import (
	"slices"
	"time"

	"github.com/apodex/apodex/internal/mcp"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/run/evidenceplane"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/workspace"
)

// toolkit builds the tools of one agent: the built-in file and shell tools
// over the agent's view of the planes, claim_outputs and finish, with the
// publication plane's gates bound to the agent's id.
type toolkit struct {
	fs             *workspace.FS
	plane          *publish.Plane
	runner         sandbox.Runner
	network        bool
	commandTimeout time.Duration
	ev             *evidenceplane.Plane // nil: no evidence plane (tests)
	hub            *mcp.Hub             // the run's MCP servers; nil: none
}

// tools returns agent id's tools acting on fs, a per-agent copy of the
// planes whose /outputs writes are gated by the lease.
func (k *toolkit) tools(id string, fs *workspace.FS) *tool.Set {
	return tool.NewSet(k.list(id, fs)...)
}

func (k *toolkit) list(id string, fs *workspace.FS) []tool.Tool {
	view := fs.View(func(planePath string, size int64) error { return k.plane.CheckWrite(id, planePath, size) })
	env := builtin.Env{FS: view, Runner: k.runner, Network: k.network, DefaultTimeout: k.commandTimeout, Outputs: k.plane.BashMounts(id)}
	var evTools []tool.Tool
	if k.ev != nil {
		env.Evidence, evTools = k.ev.ForAgent(id)
	}
	return append(append(append(builtin.Tools(env), evTools...), tool.Serial(publish.ClaimTool(k.plane, id)), tool.FinishTool{}), k.hub.Tools()...)
}

// verifierNames are the read-only tools a verifier gets (R-VERIFY-1).
var verifierNames = []string{"read_file", "grep", "list_files", "search", "fetch", "bash"}

// readOnly returns the verifier's tools: reading, searching and bash over
// planes that are all read-only in the sandbox (no publishing lease).
func (k *toolkit) readOnly(id string) []tool.Tool {
	view := k.fs.View(nil)
	view.ReadOnly = true
	env := builtin.Env{FS: view, Runner: k.runner, Network: k.network, DefaultTimeout: k.commandTimeout}
	all := builtin.Tools(env)
	if k.ev != nil {
		var evTools []tool.Tool
		env.Evidence, evTools = k.ev.ForAgent(id)
		all = append(builtin.Tools(env), evTools...)
	}
	var out []tool.Tool
	for _, tl := range all {
		if slices.Contains(verifierNames, tl.Spec().Name) {
			out = append(out, tl)
		}
	}
	return out
}
