// Package builtin is the built-in tools of SPEC §4 an agent works with:
// read_file, write_file, edit_file, list_files and grep on the planes,
// bash in the sandbox, and the evidence tools search and fetch.
//
// Guarantees:
//   - every path is resolved through workspace.FS: a tool never reads or
//     writes outside the planes, and /inputs is read-only;
//   - every file a tool changes is reported as a FileDelta (hash before/after);
//   - bash is offered only with a sandbox Runner; SandboxOffer names what
//     bash finds on the host's system directories, probed once;
//   - what read_file, grep, search and fetch show is registered as evidence
//     (SPEC R-SEARCH-2) through the EvidenceHook or EvidenceEnv given.
package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Defaults of Env.
const (
	DefaultBashTimeout = 120 * time.Second
	MaxBashTimeout     = 3600 * time.Second
	// bashOutputLimit is what the sandbox keeps of each of stdout and stderr.
	bashOutputLimit = 8 << 20
	// sniffLen is how much of a file decides whether it is binary.
	sniffLen = 8000
)

// Env is what the built-in tools act on.
type Env struct {
	FS     *workspace.FS
	Runner sandbox.Runner // nil: no sandbox could be had, and bash is not offered
	// Network lets bash commands reach the network.
	Network bool
	// DefaultTimeout and MaxTimeout bound bash commands (0: 120 s and 3600 s).
	DefaultTimeout, MaxTimeout time.Duration
	// ObservationLimit is how many bytes of Output the model reads (0: 16 KiB).
	ObservationLimit int
	// Outputs, if set, decides how each bash command sees /outputs (the
	// publishing lease, SPEC R-SBX-3); nil binds FS.Outputs read-only.
	Outputs func(ctx context.Context) (OutputsView, error)
	// Evidence, if set, registers what read_file and grep show of inputs
	// (and of command-produced files) as evidence, with its id in the footer.
	Evidence EvidenceHook
}

// OutputsView is how one bash command sees /outputs.
type OutputsView struct {
	// Mounts bind /outputs and anything below it; they replace the FS's
	// /outputs mount.
	Mounts []sandbox.Mount
	// Hint is appended to the observation when the command met a read-only
	// file system.
	Hint string
	// After, if set, runs exactly once when the command has ended; killed
	// tells that the runner killed it (timeout, cancellation) or it could
	// not run. Its text is appended to the observation.
	After func(killed bool) string
}

func (e Env) withDefaults() Env {
	if e.DefaultTimeout <= 0 {
		e.DefaultTimeout = DefaultBashTimeout
	}
	if e.MaxTimeout <= 0 {
		e.MaxTimeout = MaxBashTimeout
	}
	if e.DefaultTimeout > e.MaxTimeout {
		e.DefaultTimeout = e.MaxTimeout
	}
	if e.ObservationLimit <= 0 {
		e.ObservationLimit = tool.DefaultObservationLimit
	}
	return e
}

// publishing reports whether /outputs is governed by a publishing lease
// (claim_outputs) rather than read-only.
func (e Env) publishing() bool { return e.Outputs != nil || e.FS.OutputsWrite != nil }

// Tools returns read_file, write_file, edit_file, list_files, grep and
// bash (SPEC §4) acting on env; bash only with a Runner (without one every
// call would be refused). It panics if env.FS is nil.
func Tools(env Env) []tool.Tool {
	if env.FS == nil {
		panic("tool: Builtins needs Env.FS")
	}
	env = env.withDefaults()
	out := []tool.Tool{
		readFileTool(env),
		writeFileTool(env),
		editFileTool(env),
		listFilesTool(env),
		grepTool(env),
	}
	if env.Runner != nil {
		out = append(out, bashTool(env))
	}
	return out
}

// pathDesc is the common description of a path argument.
const pathDesc = "under /inputs (read-only), /workspace or /outputs; a relative path is taken from /workspace."

// fileError turns an error opening a resolved path into what the model reads.
func fileError(p workspace.Path, err error) tool.Result {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf("no such file or directory: %s; use list_files to see what exists", p.PlanePath)
	case errors.Is(err, workspace.ErrRefused):
		return tool.Errorf("%v", err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the host name is not the model's business
	}
	return tool.Errorf("cannot open %s: %v", p.PlanePath, err)
}

// isBinary reports whether the start of a file looks binary (has a NUL).
func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// readLine returns the next line without its line ending, keeping at most
// max bytes of it; n is the line's full length. It returns io.EOF only when
// nothing is left.
func readLine(br *bufio.Reader, max int) (line []byte, n int, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && n > 0:
			err = nil
		}
		if bytes.HasSuffix(chunk, []byte("\n")) {
			n--
			if len(line) > n {
				line = line[:n]
			}
		}
		if n > 0 && len(line) == n && line[n-1] == '\r' {
			line, n = line[:n-1], n-1
		}
		return line, n, err
	}
}

// humanSize prints a byte count for the model.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// relName is a plane-relative path as os.Root and fs.FS want it.
func relName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// clip shortens s to about n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
