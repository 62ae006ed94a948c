package sandbox

import (
	"context"
	"fmt"
	"sync"
)

// Native runs commands in a sandbox the runtime builds itself, without
// bubblewrap (SPEC R-SBX-2): it re-executes the running binary as a helper
// (helper_linux.go) in new user, mount, pid, ipc, uts and network
// namespaces, which binds exactly the system directories, the private /etc
// and the Mounts, mounts /proc (kernel knobs read-only), a minimal /dev and a
// sized tmpfs /tmp, pivots into that root and remounts it read-only, applies
// a Landlock domain (read and execute everywhere in the sandbox, writes only
// in the writable mounts, /tmp and /dev/shm), and runs the command as the
// sandbox uid with no capabilities. Its guarantees, limits and exit codes
// are Bwrap's; a setup failure shows as exit code 1 with "apodex sandbox:
// ..." on stderr.
type Native struct{}

var _ Runner = Native{}

// Run runs spec.Command in a fresh native sandbox.
func (Native) Run(ctx context.Context, spec Spec) (Result, error) {
	return launch(ctx, KindNative, "", spec)
}

var nativeProbe = sync.OnceValue(func() error {
	if msg := nativeProblem(); msg != "" {
		return fmt.Errorf("%w: native: %s", ErrUnavailable, msg)
	}
	return probed(KindNative, probeKey(KindNative, ""), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		res, err := (Native{}).Run(ctx, Spec{Command: "true"})
		if err != nil {
			return fmt.Errorf("%w: native: %v", ErrUnavailable, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%w: native: %s", ErrUnavailable, res.Stderr)
		}
		return nil
	})
})

// nativeAvailable reports whether the native sandbox works here (checked
// once per process).
func nativeAvailable() error { return nativeProbe() }
