package gen_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/verify"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// runner is the sandbox the verifier runs in (bwrap, else native).
func runner(t *testing.T) sandbox.Runner {
	t.Helper()
	r, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Skipf("no sandbox to run the world's verifier in: %v", err)
	}
	return r
}

func build(t *testing.T, st *world.Store, s gen.Spec) (*world.World, map[string]float64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), s.Name())
	diff, err := gen.Generate(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := st.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return w, diff
}

func TestGenerateDeterministicAndChecked(t *testing.T) {
	st := world.NewStore(t.TempDir())
	r := runner(t)
	for _, fam := range gen.Families {
		t.Run(fam, func(t *testing.T) {
			var prev map[string]float64
			for level := 1; level <= 5; level++ {
				a, diff := build(t, st, gen.Spec{Family: fam, Seed: 7, Level: level})
				b, _ := build(t, st, gen.Spec{Family: fam, Seed: 7, Level: level})
				c, _ := build(t, st, gen.Spec{Family: fam, Seed: 8, Level: level})
				if a.ID != b.ID {
					t.Errorf("level %d: seed 7 twice gave %s and %s", level, a.ID, b.ID)
				}
				if a.ID == c.ID {
					t.Errorf("level %d: seeds 7 and 8 gave the same id %s", level, a.ID)
				}
				if prev != nil {
					key := "acquisition_pressure"
					if fam == "code" {
						key = "failure_distance"
					}
					if diff[key] <= prev[key] {
						t.Errorf("level %d: %s %v not above level %d's %v", level, key, diff[key], level-1, prev[key])
					}
					if fam == "code" && (diff["dependency_depth"] <= prev["dependency_depth"] || diff["test_observability"] >= prev["test_observability"]) {
						t.Errorf("level %d: code coordinates do not rise: %v after %v", level, diff, prev)
					}
				}
				prev = diff
				if rep := world.Check(context.Background(), a, r); !rep.OK {
					t.Errorf("level %d: worlds check %s: %v\nsolution %+v\nempty %+v", level, a.ID, rep.Problems, rep.Solution.Failures, rep.Empty.Failures)
				}
			}
		})
	}
}

func TestGenerateRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := gen.Generate(gen.Spec{Family: "file", Seed: 1, Level: 1}, dir); err == nil {
		t.Fatal("generated into a non-empty directory")
	}
	if _, err := gen.Generate(gen.Spec{Family: "file", Seed: 1, Level: 6}, t.TempDir()); err == nil {
		t.Fatal("level 6 accepted")
	}
}

// TestCodeWorldPlanted is F3 and F4 (issue 25): a code world's verifier
// put /workspace on the test runner's PYTHONPATH, so a planted
// sitecustomize.py (or unittest.py) ended the runner with 0 and the bug
// was never fixed. Now nothing of /workspace is on the runner's path and
// the ledger runs in processes of its own, started through the sandbox's
// confine tool (tests/isolate.py), which cannot read the hidden tests nor
// reach into the runner: with the bug left in place, every planted variant
// fails, on both backends — one that exits 0 on import, one that reads
// /tests, one that attaches to the runner (ptrace) and writes exit(0)
// where it resumes, one that writes that through /proc/PID/mem. The
// command the generator wrote before passes the first, so the test shows
// the attack is real (the ptrace and /proc/PID/mem attacks are shown to
// work without the sandbox's refusals by verify's
// TestDeliverableCannotReachRunner).
func TestCodeWorldPlanted(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	w, _ := build(t, world.NewStore(t.TempDir()), gen.Spec{Family: "code", Seed: 3, Level: 1})
	c, err := w.Contract()
	if err != nil {
		t.Fatal(err)
	}
	exit0 := "import os; os._exit(0)\n"
	readTests := "raise RuntimeError('read: ' + open('/tests/test_hidden.py').read()[:200])\n"
	attacks := map[string]map[string]string{
		"sitecustomize":   {"sitecustomize.py": exit0, "unittest.py": exit0},
		"ledger-exits":    {"ledger/__init__.py": exit0},
		"ledger-reads":    {"ledger/report.py": readTests},
		"ledger-preloads": {"ledger/__init__.py": "import sitecustomize\n", "sitecustomize.py": exit0},
	}
	if runtime.GOARCH == "amd64" {
		attacks["ledger-ptraces"] = map[string]string{"ledger/__init__.py": ptraceParent}
		attacks["ledger-writes-mem"] = map[string]string{"ledger/__init__.py": procMemParent}
	}
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative} {
		r, err := sandbox.New(kind)
		if err != nil {
			t.Logf("%s: %v", kind, err)
			continue
		}
		judge := func(t *testing.T, planted map[string]string) world.Verdict {
			t.Helper()
			ws := t.TempDir()
			if err := os.CopyFS(ws, os.DirFS(w.Workspace())); err != nil {
				t.Fatal(err)
			}
			for name, content := range planted {
				f, err := os.OpenFile(filepath.Join(ws, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(content)
				f.Close()
			}
			return world.Judge(context.Background(), c, verify.Env{Runner: r, Inputs: t.TempDir(), Workspace: ws, Outputs: t.TempDir()})
		}
		t.Run(kind+"/before", func(t *testing.T) {
			saved := c.Verify[0].Command
			defer func() { c.Verify[0].Command = saved }()
			c.Verify[0].Command = "cd /tmp && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/workspace python3 -m unittest discover -s /tests -p 'test_*.py'"
			if v := judge(t, attacks["sitecustomize"]); !v.Passed {
				t.Fatalf("the old verifier command should pass the planted sitecustomize.py (is the attack broken?): %v", v.Failures)
			}
		})
		for name, files := range attacks {
			t.Run(kind+"/"+name, func(t *testing.T) {
				v := judge(t, files)
				if v.Passed {
					t.Fatalf("the unfixed ledger passed: %+v", v)
				}
				out := v.Verify[0].Stderr + v.Verify[0].Stdout
				if strings.Contains(out, "TestHidden(") || strings.Contains(out, "read: \"\"\"Hidden") {
					t.Errorf("the ledger read the hidden tests:\n%s", out)
				}
				if name == "ledger-reads" && !strings.Contains(out, "PermissionError") {
					t.Errorf("want the ledger's read of /tests refused (PermissionError):\n%s", out)
				}
			})
		}
	}
}

// exitZero is x86-64 code for exit_group(0), padded to two words.
const exitZero = `CODE = bytes([0xb8, 0xe7, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05]) + b"\x90" * 7
`

// ptraceParent attaches to the ledger's parent (the test runner) and
// writes exit_group(0) where it resumes: PTRACE_ATTACH, PEEKUSER for the
// instruction pointer, POKEDATA over it.
const ptraceParent = `import ctypes, os
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
`

// procMemParent writes the same through /proc/PID/mem, at the address in
// /proc/PID/syscall.
const procMemParent = `import os
` + exitZero + `pp = os.getppid()
try:
    pc = int(open("/proc/%d/syscall" % pp).read().split()[-1], 16)
    with open("/proc/%d/mem" % pp, "r+b", buffering=0) as m:
        m.seek(pc)
        m.write(CODE)
except (OSError, ValueError):
    pass
`
