package builtin

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
)

// Under --sandbox none the bash description says plainly that the plane
// paths do not exist inside commands; under a sandbox it does not.
func TestBashDescriptionNone(t *testing.T) {
	desc := func(r sandbox.Runner) string {
		env := testEnv(t)
		env.Runner = r
		for _, s := range tool.NewSet(Tools(env)...).Specs() {
			if s.Name == "bash" {
				return s.Description
			}
		}
		t.Fatal("no bash tool")
		return ""
	}
	none := desc(sandbox.None{})
	for _, want := range []string{"WITHOUT a sandbox", "NOT mapped", "/inputs, /workspace and /outputs"} {
		if !strings.Contains(none, want) {
			t.Errorf("none: %q missing from %q", want, none)
		}
	}
	if d := desc(&fakeRunner{}); strings.Contains(d, "NOT mapped") || !strings.Contains(d, "in the sandbox") {
		t.Errorf("sandboxed description: %q", d)
	}
}
