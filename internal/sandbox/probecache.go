package sandbox

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/etccopy"
)

// A probe (a sandbox running `true`) costs tens of milliseconds at every
// start of the runtime. Its success is remembered in the shared /etc copy
// (package etccopy), keyed by what could change the answer: the bubblewrap binary,
// the kernel, the user namespace limit and our uid. A remembered success
// is trusted; a failure is never remembered.

// probeKey is what a remembered probe of kind (with binary bin, "" for
// native: the running binary) must match.
func probeKey(kind, bin string) string {
	if bin == "" {
		bin, _ = os.Executable()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", kind, bin)
	var st syscall.Stat_t
	if syscall.Stat(bin, &st) == nil {
		fmt.Fprintf(&b, " %d %d %d.%d", st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	for _, f := range []string{"/proc/sys/kernel/osrelease", "/proc/sys/kernel/version", "/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone"} {
		v, _ := os.ReadFile(f)
		fmt.Fprintf(&b, " %q", strings.TrimSpace(string(v)))
	}
	fmt.Fprintf(&b, " uid=%d", os.Geteuid())
	return b.String()
}

// probed runs check unless a success under key is remembered, and
// remembers a success.
func probed(kind, key string, check func() error) error {
	e, err := etccopy.Host.Acquire()
	if err != nil {
		return check()
	}
	defer etccopy.Host.Release(e)
	if e.Remembered(kind, key) {
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	e.Remember(kind, key)
	return nil
}
