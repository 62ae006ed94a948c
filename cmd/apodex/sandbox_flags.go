package main

import (
	"fmt"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/sandbox"
)

// limitFlags are the per-command sandbox limits.
type limitFlags struct {
	sandbox.Limits
}

func (l *limitFlags) register(fs *flagSet) {
	sizeFlag(fs, &l.Memory, "mem-limit", sandbox.DefaultMemory, "memory of one sandboxed command, e.g. 256MiB")
	fs.Int64Var(&l.Pids, "pids-limit", sandbox.DefaultPids, "processes and threads of one sandboxed command")
	sizeFlag(fs, &l.TmpSize, "tmp-size", sandbox.DefaultTmpSize, "size of the sandbox's tmpfs /tmp, e.g. 64MiB")
	sizeFlag(fs, &l.Workspace.Bytes, "workspace-quota", sandbox.DefaultWorkspaceBytes, "allocated bytes /workspace may hold, e.g. 2GiB")
	fs.Int64Var(&l.Workspace.Files, "workspace-files", sandbox.DefaultWorkspaceFiles, "files and directories /workspace may hold")
}

// applyContract takes the task budget's limits for flags not given.
func (l *limitFlags) applyContract(set map[string]bool, b contract.Budget) {
	if b.MemLimit > 0 && !set["mem-limit"] {
		l.Memory = b.MemLimit
	}
	if b.PidsLimit > 0 && !set["pids-limit"] {
		l.Pids = b.PidsLimit
	}
	if b.TmpSize > 0 && !set["tmp-size"] {
		l.TmpSize = b.TmpSize
	}
	if b.WorkspaceQuota > 0 && !set["workspace-quota"] {
		l.Workspace.Bytes = b.WorkspaceQuota
	}
}

// networkFlag is --network (outbound through a user-mode stack) or
// --network host.
type networkFlag struct{ mode string }

func (n *networkFlag) String() string   { return n.mode }
func (n *networkFlag) IsBoolFlag() bool { return true }
func (n *networkFlag) on() bool         { return n.mode != "" }

func (n *networkFlag) Set(v string) error {
	switch v {
	case "true", "isolated":
		n.mode = "isolated"
	case "host":
		n.mode = "host"
	case "false", "off", "none":
		n.mode = ""
	default:
		return fmt.Errorf("--network %q: give --network (outbound only) or --network host", v)
	}
	return nil
}

// joinNetwork turns "--network host" into "--network=host": --network
// alone is a boolean flag.
func joinNetwork(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--network" || a == "-network") && i+1 < len(args) && (args[i+1] == "host" || args[i+1] == "isolated") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}
