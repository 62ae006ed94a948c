package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bwrap runs commands under bubblewrap, started by the helper: for a root
// runtime the helper binds the mount sources into a private staging tmpfs
// (so 0700 directories on the way do not matter), drops to SandboxUID and
// becomes bwrap as pid 1 of its own pid namespace.
//
// The sandbox's root is a tmpfs made by bwrap and remounted read-only once
// every mount point exists, so nothing outside /tmp, /dev and the writable
// Mounts can be written. /usr and the /bin, /sbin, /lib* entries are bound
// read-only (merged-/usr symlinks are recreated as symlinks). /etc holds only
// an allow-list of files a shell and common tools read (passwd, group, hosts,
// resolv.conf, nsswitch.conf, ld.so.*, localtime, alternatives, CA
// certificates, ...), copied once per process into a private directory and
// bound read-only (package etccopy); shadow files, private keys and package-manager
// credentials are absent. /root, /home, /run, /var, /sys and the host's /tmp
// are not visible.
//
// Mounts are bound in order of depth, so /outputs is bound before
// /outputs/scratch; their targets may be anywhere except under the system
// directories, /etc, /proc and /dev, and missing parents are created. A
// mount nested in a writable mount gets its mount point created in the outer
// mount's host directory; one nested in a read-only mount needs it to exist
// there already (Run says so otherwise). The
// environment is cleared and replaced by Spec.Env (or the default), the
// hostname is "sandbox", and the command runs as /bin/sh -c.
//
// Exit codes: the command's status; 128+n when it died of signal n; -1 when
// the runner killed it (Result.TimedOut tells a timeout from cancellation).
// A failure of bwrap itself to set up the sandbox (for example a Dir that
// does not exist inside it) shows as exit code 1 with "bwrap: ..." on stderr.
type Bwrap struct {
	// Path is the bwrap binary; empty means "bwrap" on PATH.
	Path string
}

var _ Runner = (*Bwrap)(nil)

// Run runs spec.Command in a fresh sandbox.
func (b *Bwrap) Run(ctx context.Context, spec Spec) (Result, error) {
	path := b.Path
	if path == "" {
		p, err := lookBwrap()
		if err != nil {
			return Result{}, err
		}
		path = p
	}
	return launch(ctx, KindBwrap, path, spec)
}

// bwrapArgs builds bwrap's argv (without argv[0]) for spec, binding etc
// (the private copy of /etc) at /etc.
func bwrapArgs(spec Spec, etc string) ([]string, error) {
	env, err := envOf(spec)
	if err != nil {
		return nil, err
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/tmp"
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: dir %q is not absolute", spec.Dir)
	}
	mounts, err := checkMounts(spec.Mounts)
	if err != nil {
		return nil, err
	}

	args := []string{"--unshare-all", "--unshare-user", "--disable-userns"}
	if spec.Network {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--cap-drop", "ALL")
	args = append(args, systemArgs()...)
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
	if spec.NoTrace {
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
	return append(args, "/bin/sh", "-c", spec.Command), nil
}

// reserved are sandbox paths a Mount may not cover or sit under.
var reserved = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev"}

// checkMounts validates mounts and returns them sorted parents first.
func checkMounts(mounts []Mount) ([]Mount, error) {
	out := slices.Clone(mounts)
	for _, m := range out {
		t := m.Target
		if !filepath.IsAbs(t) || filepath.Clean(t) != t || t == "/" || t == "/tmp" {
			return nil, fmt.Errorf("sandbox: mount target %q must be a clean absolute path other than / and /tmp", t)
		}
		for _, r := range reserved {
			if t == r || strings.HasPrefix(t, r+"/") {
				return nil, fmt.Errorf("sandbox: mount target %q is inside the system directory %s", t, r)
			}
		}
		if !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("sandbox: mount source %q is not absolute", m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return nil, fmt.Errorf("sandbox: mount source: %w", err)
		}
	}
	slices.SortStableFunc(out, func(a, b Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	// bwrap cannot create a mount point inside a read-only bind; say so
	// before it fails with exit code 1.
	for i, m := range out {
		if p, ok := container(out[:i], m.Target); ok && !p.Writable {
			host := filepath.Join(p.Source, strings.TrimPrefix(m.Target, p.Target))
			if _, err := os.Stat(host); err != nil {
				return nil, fmt.Errorf("sandbox: mount target %s is inside read-only mount %s and %s does not exist; create it on the host", m.Target, p.Target, host)
			}
		}
	}
	return out, nil
}

// container returns the deepest mount in ms strictly containing target.
func container(ms []Mount, target string) (Mount, bool) {
	var best Mount
	found := false
	for _, m := range ms {
		if strings.HasPrefix(target, m.Target+"/") && (!found || len(m.Target) > len(best.Target)) {
			best, found = m, true
		}
	}
	return best, found
}

// systemTop are the top-level system directories bound read-only.
var systemTop = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// systemArgs computes the binds of the system directories once; the host
// layout is static.
var systemArgs = sync.OnceValue(func() []string {
	var args []string
	for _, d := range systemTop {
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

func lookBwrap() (string, error) {
	if p, err := exec.LookPath("bwrap"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/bwrap"); err == nil {
		return "/usr/bin/bwrap", nil
	}
	return "", fmt.Errorf("%w: bwrap not found on PATH", ErrUnavailable)
}

// probeTimeout bounds the one-time check that bwrap can build a sandbox.
const probeTimeout = 10 * time.Second

var probe = sync.OnceValues(func() (string, error) {
	path, err := lookBwrap()
	if err != nil {
		return "", err
	}
	err = probed(KindBwrap, probeKey(KindBwrap, path), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		res, err := (&Bwrap{Path: path}).Run(ctx, Spec{Command: "true"})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if res.ExitCode != 0 {
			msg := strings.TrimSpace(string(res.Stderr))
			if res.TimedOut {
				msg = "probe timed out"
			}
			return fmt.Errorf("%w: %s: %s", ErrUnavailable, path, msg)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return path, nil
})

// Available reports whether bubblewrap can build a sandbox here. The check
// runs `bwrap ... true` once per process; the answer is cached.
func Available() error {
	_, err := probe()
	return err
}
