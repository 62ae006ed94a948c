package spec

import (
	"fmt"
	"os"
)

// The runtime re-executes its own binary for the processes that build a
// sandbox (the per-command helper, a live sandbox's server, the maker of
// an outbound network namespace); these are their shared conventions.

// HelperExit is the exit status of such a process when it cannot set up
// the sandbox; its reason is on stderr, prefixed "apodex sandbox:".
const HelperExit = 125

// Fail reports a setup failure on stderr and exits with HelperExit. Only
// a re-executed process calls it, never the runtime.
func Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "apodex sandbox: "+format+"\n", args...)
	os.Exit(HelperExit)
}

// SelfExe is the binary the runtime re-executes.
func SelfExe() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sandbox: cannot find the running binary to start the sandbox helper: %w", err)
	}
	return p, nil
}

// ConfinePath is where every sandbox holds the confine tool (package
// native): a process there starts a program through it to keep that
// program out of paths it names and out of its own process.
const ConfinePath = "/opt/apodex/confine"
