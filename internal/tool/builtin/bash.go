package builtin

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

type bashArgs struct {
	Command  string `json:"command" desc:"The shell command, run by /bin/sh -c in /workspace."`
	TimeoutS int    `json:"timeout_s,omitempty" desc:"Seconds before the command is killed (default 120, at most 3600)."`
}

func bashTool(env Env) tool.Tool {
	network := "There is no network."
	if env.Network {
		network = "The network is reachable."
	}
	planes := "/inputs and /outputs are read-only there; only /workspace and /tmp are writable, and /tmp does not persist."
	if env.Outputs != nil {
		planes = "/inputs is read-only there; /workspace, /outputs/scratch/ (shared, within a quota, never delivered; what a command writes there reaches the shared copy when the command ends) and /tmp are writable, and /tmp does not persist. /outputs is read-only unless you hold the publishing lease (claim_outputs); then changes to your declared paths are kept when the command ends, and anything else under /outputs is not."
	}
	where := "in the sandbox, starting in /workspace"
	if sandbox.KindOf(env.Runner) == sandbox.KindNone {
		// --sandbox none: say plainly that the plane paths do not exist.
		where = "directly on this machine WITHOUT a sandbox (--sandbox none), starting in the host directory that holds /workspace"
		planes = "The paths /inputs, /workspace and /outputs are NOT mapped inside commands: they do not exist there; use paths relative to the starting directory for the workspace, and the file tools for /inputs and /outputs."
		network = "The host's network is reachable."
	}
	desc := fmt.Sprintf("Run a shell command (/bin/sh -c) %s. %s %s Returns the exit code, stdout and stderr. Default timeout %s, at most %s; at the timeout the whole process group is killed.",
		where, planes, network, seconds(env.DefaultTimeout), seconds(env.MaxTimeout))
	return tool.Define("bash", desc, env.ObservationLimit,
		func(ctx context.Context, a bashArgs) tool.Result { return bash(ctx, env, a) })
}

func bash(ctx context.Context, env Env, a bashArgs) tool.Result {
	if env.Runner == nil {
		return tool.Errorf("%v", sandbox.ErrUnavailable)
	}
	if strings.TrimSpace(a.Command) == "" {
		return tool.Errorf("command is empty; give a shell command to run")
	}
	if a.TimeoutS < 0 {
		return tool.Errorf("timeout_s must be positive (seconds; default %d, at most %d)", int(env.DefaultTimeout.Seconds()), int(env.MaxTimeout.Seconds()))
	}
	timeout, note := env.DefaultTimeout, ""
	if a.TimeoutS > 0 {
		timeout = time.Duration(a.TimeoutS) * time.Second
	}
	if timeout > env.MaxTimeout {
		timeout = env.MaxTimeout
		note = fmt.Sprintf("timeout_s %d is above the maximum; used %s\n", a.TimeoutS, seconds(timeout))
	}

	mounts := planeMounts(env.FS)
	var view OutputsView
	if env.Outputs != nil {
		v, err := env.Outputs(ctx)
		if err != nil {
			return tool.Errorf("could not prepare /outputs for the command: %v", err)
		}
		view = v
		mounts = slices.DeleteFunc(mounts, func(m sandbox.Mount) bool { return m.Target == "/outputs" })
		mounts = append(mounts, v.Mounts...)
	}

	// The deltas come from the planes' tracked indexes: the cost is the
	// files changed, not the files there (workspace.FS.Mark).
	mark, beforeErr := env.FS.Mark(workspace.Workspace, workspace.Outputs)
	res, err := env.Runner.Run(ctx, sandbox.Spec{
		Command:     a.Command,
		Dir:         "/workspace",
		Mounts:      mounts,
		Network:     env.Network,
		Timeout:     timeout,
		OutputLimit: bashOutputLimit,
	})
	var published string // what the /outputs view says it did, e.g. commits
	if view.After != nil {
		published = view.After(err != nil || res.TimedOut || res.ExitCode == -1)
	}
	if err != nil {
		if beforeErr == nil {
			_, _ = env.FS.Since(mark) // end the mark
		}
		if published != "" {
			published = "\n" + published
		}
		return tool.Errorf("could not run the command: %v%s", err, published)
	}
	meta := &record.ToolMeta{
		ExitCode:    &res.ExitCode,
		DurationMS:  res.Duration.Milliseconds(),
		TimedOut:    res.TimedOut,
		StdoutBytes: res.StdoutBytes,
		StderrBytes: res.StderrBytes,
	}
	if res.Mechanism != "" {
		uid := res.UID
		meta.UID = &uid
	}
	meta.Limit = res.Limit
	var deltas []tool.FileDelta
	if beforeErr == nil {
		var afterErr error
		deltas, afterErr = env.FS.Since(mark)
		if afterErr != nil {
			meta.SnapshotError = afterErr.Error()
		}
	} else {
		meta.SnapshotError = beforeErr.Error()
	}

	var b strings.Builder
	b.WriteString(note)
	fmt.Fprintf(&b, "exit code: %d\n", res.ExitCode)
	if res.TimedOut {
		fmt.Fprintf(&b, "timed out after %s, process group killed\n", seconds(timeout))
	}
	section(&b, "stdout", res.Stdout, res.StdoutBytes)
	section(&b, "stderr", res.Stderr, res.StderrBytes)
	if note := res.LimitNote(); note != "" {
		b.WriteString("limit: " + note + "\n")
	}
	if published != "" {
		b.WriteString(strings.TrimSuffix(published, "\n") + "\n")
	}
	if readOnly := bytes.Contains(res.Stderr, readOnlyFS) || bytes.Contains(res.Stdout, readOnlyFS); readOnly {
		if view.Hint != "" && (bytes.Contains(res.Stderr, outputsDir) || bytes.Contains(res.Stdout, outputsDir)) {
			b.WriteString("note: " + view.Hint + "\n")
		}
		if env.FS.Own != "" {
			fmt.Fprintf(&b, "note: in the shared workspace you may write only under /workspace/%s/\n", env.FS.Own)
		}
	}
	return tool.Result{Output: strings.TrimSuffix(b.String(), "\n"), Deltas: deltas, Observed: true, Meta: meta}
}

// readOnlyFS is how EROFS reads in a shell's, coreutils' or Python's error.
var (
	readOnlyFS = []byte("Read-only file system")
	outputsDir = []byte("/outputs")
)

// section writes one output stream, saying so when it is empty or was cut
// by the sandbox.
func section(b *strings.Builder, name string, data []byte, total int64) {
	switch {
	case total == 0 && len(data) == 0:
		fmt.Fprintf(b, "--- %s: empty ---\n", name)
		return
	case total > int64(len(data)):
		fmt.Fprintf(b, "--- %s (first %s of %s; redirect to a file to keep it all) ---\n", name, humanSize(int64(len(data))), humanSize(total))
	default:
		fmt.Fprintf(b, "--- %s ---\n", name)
	}
	b.WriteString(strings.ToValidUTF8(string(data), "\uFFFD"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
}

// seconds prints a duration as whole seconds ("120s").
func seconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
}

// planeMounts are the planes of fs as the sandbox binds them: /inputs and
// /outputs read-only, /workspace writable. Where a publishing plane governs
// /outputs (R-SBX-3), bash replaces the /outputs mount with the plane's.
//
// With fs.Own set, /workspace is read-only except /workspace/<Own>, which
// must exist on the host; with fs.ReadOnly, every plane is read-only.
func planeMounts(fs *workspace.FS) []sandbox.Mount {
	if fs.ReadOnly {
		return []sandbox.Mount{{Source: fs.Inputs, Target: "/inputs"}, {Source: fs.Workspace, Target: "/workspace"}, {Source: fs.Outputs, Target: "/outputs"}}
	}
	if fs.Own != "" {
		return []sandbox.Mount{
			{Source: fs.Inputs, Target: "/inputs"},
			{Source: fs.Workspace, Target: "/workspace"},
			{Source: filepath.Join(fs.Workspace, fs.Own), Target: "/workspace/" + fs.Own, Writable: true, Watch: fs.Trees()},
			{Source: fs.Outputs, Target: "/outputs"},
		}
	}
	return []sandbox.Mount{
		{Source: fs.Inputs, Target: "/inputs"},
		{Source: fs.Workspace, Target: "/workspace", Writable: true, Watch: fs.Trees()},
		{Source: fs.Outputs, Target: "/outputs"},
	}
}
