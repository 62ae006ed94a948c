package sandbox_test

import (
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/sandboxtest"
)

// The suite's helpers, from package sandboxtest, by their short names.
var (
	runners    = sandboxtest.Runners
	sleepToken = sandboxtest.SleepToken
	procsWith  = sandboxtest.ProcsWith
	assertGone = sandboxtest.AssertGone
)

func sandboxes(t testing.TB) map[string]Runner { return sandboxtest.Sandboxes(t) }

func run(t *testing.T, r Runner, spec Spec) Result {
	t.Helper()
	return sandboxtest.Run(t, r, spec)
}

func hostUIDOf() int { return CommandUID() }
