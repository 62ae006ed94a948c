package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
)

// F15 and F1 (issue 25): the seccomp filter refuses io_uring (ENOSYS),
// whose operations no filter sees, and the ioctls that type into a
// terminal, TIOCSTI and TIOCLINUX (EPERM), on any descriptor and with any
// upper half of the request (the kernel reads 32 bits); other ioctls pass
// (ENOTTY on /dev/null).
func TestSeccompRefuses(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl (its syscall)")
	}
	ioctl := map[string]int{"amd64": 16, "arm64": 29}[runtime.GOARCH]
	if ioctl == 0 {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	calls := []struct {
		name, args string
		errno      int
	}{
		{"io_uring_setup", `425, 8, $params`, 38},
		{"io_uring_enter", `426, -1, 1, 0, 0, 0, 0`, 38},
		{"io_uring_register", `427, -1, 0, 0, 0`, 38},
		{"TIOCSTI", fmt.Sprintf(`%d, 0, 0x5412, $c`, ioctl), 1},
		{"TIOCSTI-high", fmt.Sprintf(`%d, 0, 0x700005412, $c`, ioctl), 1},
		{"TIOCLINUX", fmt.Sprintf(`%d, 0, 0x541C, $c`, ioctl), 1},
		{"TIOCGWINSZ", fmt.Sprintf(`%d, 0, 0x5413, $params`, ioctl), 25},
	}
	var script strings.Builder
	script.WriteString(`my $params = "\0" x 256; my $c = "\x06";` + "\n")
	for _, c := range calls {
		fmt.Fprintf(&script, "{ my $r = syscall(%s); print \"%s \", ($r == -1 ? $!+0 : \"ok\"), \"\\n\"; }\n", c.args, c.name)
	}
	cmd := "perl -e '" + script.String() + "'"
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: cmd})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, c := range calls {
				if want := fmt.Sprintf("%s %d\n", c.name, c.errno); !strings.Contains(string(res.Stdout), want) {
					t.Errorf("want %q in\n%s", want, res.Stdout)
				}
			}
		})
	}
}

// abiProbe makes system calls through another ABI than the native one:
// getpid and then unshare(CLONE_NEWUSER) through int $0x80 (the 32-bit
// ABI), or with X32 getpid through the x32 numbers. It prints each result.
const abiProbe = `
static long sys64(long nr, long a, long b, long c) {
	long r;
	__asm__ volatile ("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
static long sys32(long nr, long a) {
	long r;
	__asm__ volatile ("int $0x80" : "=a"(r) : "a"(nr), "b"(a) : "memory");
	return r;
}
static void say(const char *what, long v) {
	char buf[64];
	int n = 0;
	while (*what) buf[n++] = *what++;
	buf[n++] = ' ';
	if (v < 0) { buf[n++] = '-'; v = -v; }
	char digits[24];
	int d = 0;
	do { digits[d++] = '0' + v % 10; v /= 10; } while (v);
	while (d) buf[n++] = digits[--d];
	buf[n++] = '\n';
	sys64(1, 1, (long)buf, n);
}
__attribute__((force_align_arg_pointer)) void _start(void) {
#ifdef X32
	say("x32-getpid", sys64(39 | 0x40000000, 0, 0, 0));
#else
	say("i386-getpid", sys32(20, 0));
	say("i386-unshare", sys32(310, 0x10000000));
#endif
	sys64(231, 0, 0, 0);
}
`

// F8 (issue 25): the filter's rules hold for every system call ABI,
// because another ABI than the native one kills the process (SIGSYS): a
// command cannot reach unshare(CLONE_NEWUSER) by its 32-bit number
// through int $0x80, nor make x32 calls.
func TestOtherABIKilled(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe is x86-64 code")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the probe")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte(abiProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ out, def string }{{"i386", "-DI386"}, {"x32", "-DX32"}} {
		out, err := exec.Command(gcc, "-static", "-nostdlib", "-fno-stack-protector", "-fno-pie", "-no-pie", "-O1", p.def, "-o", filepath.Join(dir, p.out), src).CombinedOutput()
		if err != nil {
			t.Skipf("cannot build the probe: %v\n%s", err, out)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A kernel without the 32-bit ABI (IA32 emulation off: Linux 6.7's
	// ia32_emulation=0, or built without it) faults int $0x80 with
	// SIGSEGV in any process: there is nothing of it to filter.
	want := map[string]int{"i386": 159, "x32": 159}
	probe32 := exec.Command(filepath.Join(dir, "i386"))
	if out, err := probe32.Output(); err != nil && len(out) == 0 {
		if ws, ok := probe32.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGSEGV {
			t.Log("this kernel has no 32-bit ABI (int $0x80 faults outside the sandbox too)")
			want["i386"] = 128 + int(syscall.SIGSEGV)
		}
	}
	mounts := []Mount{{Source: dir, Target: "/inputs"}}
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			for _, probe := range []string{"i386", "x32"} {
				res := run(t, r, Spec{Command: "/inputs/" + probe + "; echo exit=$?", Mounts: mounts})
				out := string(res.Stdout)
				if !strings.HasSuffix(out, fmt.Sprintf("exit=%d\n", want[probe])) || strings.Contains(out, probe+"-") {
					t.Errorf("%s: want the probe killed (exit %d) at its first call, got\n%s%s", probe, want[probe], out, res.Stderr)
				}
			}
		})
	}
}

// F4 (issue 25): with Spec.NoTrace (a verifier's command) ptrace,
// process_vm_readv, process_vm_writev and pidfd_getfd fail with EPERM and
// /proc is read-only (writing /proc/self/mem fails with EROFS); without it
// the same calls reach the kernel (an agent's command keeps strace and gdb).
func TestNoTrace(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl (its syscall)")
	}
	nr := map[string][4]int{"amd64": {101, 310, 311, 438}, "arm64": {117, 270, 271, 438}}[runtime.GOARCH]
	if nr[0] == 0 {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	// PTRACE_TRACEME; reading and writing no bytes of itself; a descriptor
	// of pidfd -1 (EBADF when it reaches the kernel); /proc/self/mem for
	// writing.
	cmd := fmt.Sprintf(`perl -e '
sub show { my ($name, $r) = @_; print "$name ", ($r == -1 ? $!+0 : "ok"), "\n"; }
show("ptrace", syscall(%d, 0, 0, 0, 0));
show("process_vm_readv", syscall(%d, $$, 0, 0, 0, 0, 0));
show("process_vm_writev", syscall(%d, $$, 0, 0, 0, 0, 0));
show("pidfd_getfd", syscall(%d, -1, 0, 0));
show("proc_mem", open(my $f, "+<", "/proc/self/mem") ? 0 : -1);
'`, nr[0], nr[1], nr[2], nr[3])
	want := map[bool]string{
		true:  "ptrace 1\nprocess_vm_readv 1\nprocess_vm_writev 1\npidfd_getfd 1\nproc_mem 30\n",
		false: "ptrace ok\nprocess_vm_readv ok\nprocess_vm_writev ok\npidfd_getfd 9\nproc_mem ok\n",
	}
	for name, r := range sandboxes(t) {
		for _, noTrace := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/notrace=%v", name, noTrace), func(t *testing.T) {
				res := run(t, r, Spec{Command: cmd, NoTrace: noTrace})
				if res.ExitCode != 0 || string(res.Stdout) != want[noTrace] {
					t.Errorf("exit %d, got\n%swant\n%s%s", res.ExitCode, res.Stdout, want[noTrace], res.Stderr)
				}
			})
		}
	}
}
