package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/apodex/apodex/internal/sandbox/native"
)

// Native runs commands in a sandbox the runtime builds itself, without
// bubblewrap (SPEC R-SBX-2): it re-executes the running binary as a helper
// (package native) in new user, mount, pid, ipc, uts and network
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

// Run runs sp.Command in a fresh native sandbox.
func (Native) Run(ctx context.Context, sp Spec) (Result, error) {
	return native.Launch(ctx, KindNative, "", sp)
}

var nativeProbe = sync.OnceValue(func() error {
	if msg := native.Problem(); msg != "" {
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
