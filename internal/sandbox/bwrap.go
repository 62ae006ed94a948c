package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/sandbox/bwrap"
	"github.com/apodex/apodex/internal/sandbox/native"
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

// Run runs sp.Command in a fresh sandbox.
func (b *Bwrap) Run(ctx context.Context, sp Spec) (Result, error) {
	path := b.Path
	if path == "" {
		p, err := bwrap.Look()
		if err != nil {
			return Result{}, err
		}
		path = p
	}
	return native.Launch(ctx, KindBwrap, path, sp)
}

// probeTimeout bounds the one-time check that bwrap can build a sandbox.
const probeTimeout = 10 * time.Second

var probe = sync.OnceValues(func() (string, error) {
	path, err := bwrap.Look()
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

// Version is bubblewrap's version line ("bubblewrap 0.8.0"), or "" when it
// is not installed. It is recorded with every run.
func Version() string { return bwrap.Version() }
