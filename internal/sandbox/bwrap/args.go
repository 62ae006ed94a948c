// Package bwrap is bubblewrap's side of the sandbox: the command line that
// builds a command's sandbox from a Spec (Args: read-only system
// directories, the private /etc, /proc with its knobs read-only, a minimal
// /dev, a private /tmp, the mounts in order of depth, a read-only root, a
// cleared environment, no capabilities, no user namespaces), where the
// binary is (Look) and its version. The runtime's helper (package native)
// stages the mounts and execs bubblewrap with these arguments.
package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Args builds bwrap's argv (without argv[0]) for sp, binding etc
// (the private copy of /etc) at /etc.
func Args(sp spec.Spec, etc string) ([]string, error) {
	env, err := spec.Env(sp)
	if err != nil {
		return nil, err
	}
	dir := sp.Dir
	if dir == "" {
		dir = "/tmp"
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: dir %q is not absolute", sp.Dir)
	}
	mounts, err := spec.CheckMounts(sp.Mounts)
	if err != nil {
		return nil, err
	}

	args := []string{"--unshare-all", "--unshare-user", "--disable-userns"}
	if sp.Network {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--cap-drop", "ALL")
	args = append(args, SystemArgs()...)
	args = append(args, "--ro-bind", etc, "/etc")
	// bwrap's own cover of /proc/sys fails in an unprivileged user
	// namespace; bind the host's read-only over it (namespaced knobs such as
	// fs/mqueue would otherwise be writable).
	args = append(args, "--proc", "/proc", "--ro-bind-try", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, m := range mounts {
		op := "--ro-bind"
		if m.Writable {
			op = "--bind"
		}
		args = append(args, op, m.Source, m.Target)
	}
	if sp.NoTrace {
		args = append(args, "--remount-ro", "/proc")
	}
	args = append(args,
		"--remount-ro", "/",
		"--chdir", dir,
		"--hostname", "sandbox",
		"--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	return append(args, "/bin/sh", "-c", sp.Command), nil
}

// SystemTop are the top-level system directories bound read-only.
var SystemTop = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// SystemArgs computes the binds of the system directories once; the host
// layout is static.
var SystemArgs = sync.OnceValue(func() []string {
	var args []string
	for _, d := range SystemTop {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if to, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", to, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return args
})

// Look finds bubblewrap: on PATH, else /usr/bin/bwrap.
func Look() (string, error) {
	if p, err := exec.LookPath("bwrap"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/bwrap"); err == nil {
		return "/usr/bin/bwrap", nil
	}
	return "", fmt.Errorf("%w: bwrap not found on PATH", spec.ErrUnavailable)
}

// WithTmpSize puts --size before bwrap's --tmpfs /tmp.
func WithTmpSize(args []string, size int64) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--tmpfs" && args[i+1] == "/tmp" {
			out := append([]string{}, args[:i]...)
			out = append(out, "--size", strconv.FormatInt(size, 10))
			return append(out, args[i:]...)
		}
	}
	return args
}

// BeforeRootReadOnly inserts more arguments into args (as Args made them)
// before the root is remounted read-only, so a bind they make gets its
// mount point.
func BeforeRootReadOnly(args []string, more ...string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--remount-ro" && args[i+1] == "/" {
			return slices.Concat(args[:i:i], more, args[i:])
		}
	}
	return append(args, more...)
}
