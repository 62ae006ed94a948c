package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// None runs commands directly on the host, with the same timeout,
// process-group and output-cap behaviour as Bwrap but no isolation: the
// command sees the whole host filesystem, network and (as far as the
// environment is concerned) only Spec.Env or the default environment.
//
// Mounts are not bound; they only translate Spec.Dir from a sandbox path to
// a host path (the mount with the longest matching Target wins; a Dir no
// mount covers is used as a host path, and an empty Dir means the host's
// /tmp). Paths inside Command are not translated. Processes the command
// leaves in its process group are killed when it exits; one that calls
// setsid escapes that, which Bwrap's PID namespace prevents.
type None struct{}

var _ Runner = None{}

// Run runs sp.Command on the host.
func (None) Run(ctx context.Context, sp Spec) (Result, error) {
	env, err := spec.Env(sp)
	if err != nil {
		return Result{}, err
	}
	dir := sp.Dir
	if dir == "" {
		dir = "/tmp"
	}
	if !filepath.IsAbs(dir) {
		return Result{}, fmt.Errorf("sandbox: dir %q is not absolute", sp.Dir)
	}
	cmd := exec.Command("/bin/sh", "-c", sp.Command)
	cmd.Dir = hostPath(sp.Mounts, filepath.Clean(dir))
	cmd.Env = env
	return command.Supervise(ctx, cmd, sp, nil)
}

// hostPath maps a sandbox path to the host through the mounts.
func hostPath(mounts []Mount, p string) string {
	best, host := -1, p
	for _, m := range mounts {
		t := filepath.Clean(m.Target)
		if p != t && !strings.HasPrefix(p, strings.TrimSuffix(t, "/")+"/") {
			continue
		}
		if len(t) > best {
			best, host = len(t), filepath.Join(m.Source, strings.TrimPrefix(p, t))
		}
	}
	return host
}
