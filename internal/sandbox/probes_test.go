package sandbox_test

import (
	"os"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
)

// TestProbesNotRoot re-runs issue 25's sandbox probes with the runtime not
// root (run as root, the test re-executes itself as uid 65534): the
// TIOCSTI injection on a real pty, the 32-bit and x32 system call ABIs,
// the seccomp refusals (user namespaces, io_uring, ptrace with NoTrace),
// fallocate, SysV shared memory per command, and the workspace quota near
// and far from its bound. The
// confine probes (TestConfineNotRoot) and the fork and memory bombs
// (TestNonRootLimits) re-execute themselves.
func TestProbesNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the probes run as this uid already")
	}
	reexecAs(t, SandboxUID, "^(TestNoTerminalInjection|TestOtherABIKilled|TestSeccompRefuses|TestNoTrace|TestFallocateRefused|TestIPCPerCommand|TestWorkspaceQuotaHard|TestWorkspaceQuotaHardFar)$")
}
