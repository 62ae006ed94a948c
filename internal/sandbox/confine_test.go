package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/limits"
)

// F4 (issue 25): code under test that its verifier's runner started in a
// process of its own could read the hidden tests and reach into the
// runner (same uid, same pid namespace). Started through the confine tool
// every sandbox holds, it cannot: /tests is neither readable nor listable
// for it while the runner still reads it; the runner's /proc/PID/environ
// and maps are closed to it; from Linux 6.12 it cannot signal the runner;
// what it was not told to lose (/inputs, /tmp) it keeps.
func TestConfine(t *testing.T) {
	tests, inputs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(tests, "secret"), []byte("expected-42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inputs, "public"), []byte("public\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []Mount{{Source: tests, Target: "/tests"}, {Source: inputs, Target: "/inputs"}}
	cmd := fmt.Sprintf(`cat /tests/secret; echo "runner=$?"
%s -hide /tests -- sh -c '
cat /tests/secret; echo "cat=$?"
ls /tests >/dev/null; echo "ls=$?"
cat /inputs/public; echo "public=$?"
echo x > /tmp/c; echo "tmp=$?"
cat /proc/$PPID/environ >/dev/null; echo "environ=$?"
cat /proc/$PPID/maps >/dev/null; echo "maps=$?"
kill -0 $PPID; echo "kill=$?"
'
echo "confined=$?"
cat /tests/secret; echo "again=$?"`, ConfinePath)
	for name, r := range sandboxes(t) {
		for _, noTrace := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/notrace=%v", name, noTrace), func(t *testing.T) {
				res := run(t, r, Spec{Command: cmd, Mounts: mounts, NoTrace: noTrace})
				out := string(res.Stdout)
				if strings.Count(out, "expected-42") != 2 {
					t.Errorf("the secret was read %d times, want twice (by the runner only):\n%s\n%s", strings.Count(out, "expected-42"), out, res.Stderr)
				}
				want := map[string]bool{"runner": true, "cat": false, "ls": false, "public": true, "tmp": true, "environ": false, "maps": false, "confined": true, "again": true}
				if limits.KernelAtLeast(6, 12) {
					want["kill"] = false
				}
				for key, ok := range want {
					line := lineOf(out, key+"=")
					if got := line == key+"=0"; line == "" || got != ok {
						t.Errorf("%s: %q, want success %v\n%s\n%s", key, line, ok, out, res.Stderr)
					}
				}
			})
		}
	}
}

// TestConfineNotRoot: the same, the runtime not being root (run as root,
// the test re-executes itself as uid 65534).
func TestConfineNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestConfine runs as this uid already")
	}
	reexecAs(t, SandboxUID, "^TestConfine$")
}

// TestConfineRefusesBadUse: confine says how to use it and runs nothing
// when it is not told what to run.
func TestConfineRefusesBadUse(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			for _, args := range []string{"", "-hide", "-hide tests -- true", "-bogus -- true"} {
				res := run(t, r, Spec{Command: ConfinePath + " " + args})
				if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "apodex sandbox: ") {
					t.Errorf("confine %s: exit %d: %s", args, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}

// lineOf is the first line of s that starts with prefix ("" none).
func lineOf(s, prefix string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
