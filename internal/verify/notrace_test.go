package verify

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
)

// testAddOutside runs the deliverable in a subprocess and checks its output
// from outside it (the README's advice for untrusted code), judged by its
// exit status.
const testAddOutside = `import subprocess, sys, unittest

def add(a, b):
    code = "import sys; sys.path.insert(0, '/outputs'); from solution import add; print(add(%d, %d))" % (a, b)
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.split()
    return lines[-1] if lines else None

class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), "5")

if __name__ == "__main__":
    unittest.main()
`

// exitZero is x86-64 code for exit_group(0), padded to two words.
const exitZero = `CODE = bytes([0xb8, 0xe7, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05]) + b"\x90" * 7
`

// The wrong add() and an attack on the test runner, its parent: the code
// is written where the runner resumes once the deliverable has ended, so the
// runner exits 0.
var attacks = map[string]string{
	// PTRACE_ATTACH, then PEEKUSER for the instruction pointer and
	// POKEDATA over it.
	"ptrace": `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
` + exitZero + `pp = os.getppid()
if libc.ptrace(16, pp, None, None) == 0:
    os.waitpid(pp, 0x40000000)
    rip = libc.ptrace(3, pp, ctypes.c_void_p(16 * 8), None) & (2**64 - 1)
    for i in (0, 8):
        libc.ptrace(5, pp, ctypes.c_void_p(rip + i), ctypes.c_void_p(int.from_bytes(CODE[i:i + 8], "little")))
    libc.ptrace(17, pp, None, None)
`,
	// /proc/PID/syscall for the instruction pointer, /proc/PID/mem to
	// write over it.
	"proc-mem": `import os
` + exitZero + `pp = os.getppid()
try:
    pc = int(open("/proc/%d/syscall" % pp).read().split()[-1], 16)
    with open("/proc/%d/mem" % pp, "r+b", buffering=0) as m:
        m.seek(pc)
        m.write(CODE)
except (OSError, ValueError):
    pass
`,
}

// traceable runs specs without NoTrace: the verifier before F4.
type traceable struct{ sandbox.Runner }

func (r traceable) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	spec.NoTrace = false
	return r.Runner.Run(ctx, spec)
}

// TestDeliverableCannotReachRunner is F4 (issue 25): a wrong add() that
// attaches to the test runner running it in a subprocess (ptrace) or writes
// its memory (/proc/PID/mem) made the runner exit 0 and the clause pass, on
// both backends. A verifier's command refuses both now (Spec.NoTrace): the
// wrong add() fails. Each attack is first shown to work without NoTrace, so
// the test cannot pass on an attack that does nothing.
func TestDeliverableCannotReachRunner(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the attacks write x86-64 code")
	}
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative} {
		runner, err := sandbox.New(kind)
		if err != nil {
			t.Logf("%s: %v", kind, err)
			continue
		}
		for name, attack := range attacks {
			t.Run(kind+"/"+name, func(t *testing.T) {
				s := pyState(t, attack+wrongSolution)
				write(t, s.task, map[string]string{"tests/test_add.py": testAddOutside})
				cmd := "python3 -m unittest -v test_add"
				s.env.Runner = traceable{runner}
				if r := pyClause(t, s, cmd, ""); !r.Passed {
					t.Fatalf("without NoTrace the attack should make the runner exit 0 (is the attack broken?): %+v", r)
				}
				s.env.Runner = runner
				r := pyClause(t, s, cmd, "")
				if r.Passed || r.ExitCode != 1 || !strings.Contains(r.Stderr, "AssertionError") {
					t.Errorf("the wrong add() was not reported failing: %+v", r)
				}
			})
		}
	}
}

// readsTests is a wrong add() that answers with the value the hidden test
// expects, read from /tests while it runs.
const readsTests = `import re
def add(a, b):
    return int(re.findall(r'assertEqual\(add\(2, 3\), "(\d+)"\)', open("/tests/test_add.py").read())[0])
`

// TestConfinedDeliverableCannotReadTests is F4 (issue 25) for any task's
// clause, as the README advises: a runner that starts the deliverable
// through the sandbox's confine tool (-hide /tests) keeps the hidden tests
// from it. A wrong add() that reads the expected value from /tests passes
// a runner that starts it plainly, and fails (PermissionError) under one
// that starts it through confine, on both backends.
func TestConfinedDeliverableCannotReadTests(t *testing.T) {
	confined := strings.Replace(testAddOutside, `subprocess.run([sys.executable,`, `subprocess.run(["`+sandbox.ConfinePath+`", "-hide", "/tests", "-hide", "/report", "--", sys.executable,`, 1)
	if confined == testAddOutside {
		t.Fatal("the runner was not rewritten")
	}
	confined = strings.Replace(confined, "timeout=60)", "timeout=60, cwd=\"/tmp\")\n    sys.stderr.write(out.stderr)", 1)
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative} {
		runner, err := sandbox.New(kind)
		if err != nil {
			t.Logf("%s: %v", kind, err)
			continue
		}
		t.Run(kind, func(t *testing.T) {
			s := pyState(t, readsTests)
			s.env.Runner = runner
			cmd := "python3 -m unittest -v test_add"
			write(t, s.task, map[string]string{"tests/test_add.py": testAddOutside})
			if r := pyClause(t, s, cmd, ""); !r.Passed {
				t.Fatalf("started plainly, the deliverable should read /tests and pass (is the attack broken?): %+v", r)
			}
			write(t, s.task, map[string]string{"tests/test_add.py": confined})
			r := pyClause(t, s, cmd, "")
			if r.Passed || !strings.Contains(r.Stderr, "PermissionError") {
				t.Errorf("started through confine, the deliverable read /tests: %+v", r)
			}
		})
	}
}
