package gate

import (
	"testing"

	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/sandbox"
)

// Verification clauses run under the sandbox kind the run's commands ran
// under; a run without isolation (none) still verifies in a sandbox.
func TestVerifierSandboxFollowsTheRun(t *testing.T) {
	runtest.NeedSandbox(t)
	auto, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{sandbox.KindNative: sandbox.KindNative, sandbox.KindNone: sandbox.KindOf(auto), "": sandbox.KindOf(auto), "unavailable": sandbox.KindOf(auto)}
	if sandbox.Available() == nil {
		want[sandbox.KindBwrap] = sandbox.KindBwrap
	}
	for kind, w := range want {
		r, err := Sandbox(kind)
		if err != nil {
			t.Fatalf("%q: %v", kind, err)
		}
		if got := sandbox.KindOf(r); got != w {
			t.Errorf("run kind %q: the verifier runs under %s, want %s", kind, got, w)
		}
	}
}
