package sandbox_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/limits"
)

// F5 (issue 25): a runtime that is not root bounded a command's memory
// per process only and its processes not at all (1,505 processes against a
// limit of 512). Now, without a cgroup it may write, the processes of a
// sandbox are bounded by RLIMIT_NPROC, which Linux 5.14 and later counts
// in the sandbox's own user namespace: a fork bomb stops at the limit,
// while the user's processes outside the sandbox do not count. A delegated
// cgroup, where there is one, bounds memory and processes together; else
// each process's memory is bounded by RLIMIT_AS and their sum measured
// (the red team's bomb: 4 processes of 150 MiB under a 256 MiB limit).
// Run as root, the test re-executes itself as uid 65534.
func TestNonRootLimits(t *testing.T) {
	if os.Geteuid() == 0 {
		reexecAs(t, SandboxUID, "^TestNonRootLimits$")
		return
	}
	mech := Mechanism(Limits{})
	t.Logf("uid %d, %s", os.Geteuid(), mech)
	if strings.Contains(mech, "pids=none") {
		if limits.NprocPerUserns() {
			t.Fatalf("no process limit without root on a kernel that counts processes per user namespace: %s", mech)
		}
		t.Skip("before Linux 5.14 RLIMIT_NPROC counts every process of the uid: no process limit without a cgroup")
	}
	// 80 processes of this uid outside any sandbox, more than the limit.
	var outside []*exec.Cmd
	for range 80 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		outside = append(outside, c)
	}
	t.Cleanup(func() {
		for _, c := range outside {
			c.Process.Kill()
			c.Wait()
		}
	})
	lim := Limits{Pids: 64, Memory: 256 << 20}
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Limits: lim, Timeout: 30 * time.Second,
				Command: `i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); done; echo forked`})
			if strings.Contains(string(res.Stdout), "forked") {
				t.Errorf("300 processes forked under a limit of 64 (%s): exit %d", res.Mechanism, res.ExitCode)
			}
			// The bomb's processes are killed with its command; their exits
			// still count against the limit until the kernel has reaped
			// them, which under load takes a moment.
			waitNoProcess(t, []byte("sleep\x0030\x00"))
			res = run(t, r, Spec{Limits: lim, Timeout: 30 * time.Second,
				Command: `for i in $(seq 20); do sleep 0.2 & done; wait; echo ok`})
			if !strings.Contains(string(res.Stdout), "ok") {
				t.Errorf("20 processes under a limit of 64, with 80 of the uid outside: exit %d %s", res.ExitCode, res.Stderr)
			}
			if _, err := os.Stat("/usr/bin/python3"); err != nil {
				return
			}
			bomb := `for i in 1 2 3 4; do python3 -c "import time; b = b'x' * (150 << 20); time.sleep(1)" & done; wait; echo survived`
			res = run(t, r, Spec{Limits: lim, Timeout: 30 * time.Second, Command: bomb})
			// Without a cgroup each process is under RLIMIT_AS; their sum
			// is measured and the command killed past the limit.
			if res.Limit != LimitMemory || strings.Contains(string(res.Stdout), "survived") {
				t.Errorf("4 x 150 MiB under 256 MiB with %s: limit %q, exit %d, %s", res.Mechanism, res.Limit, res.ExitCode, res.Stdout)
			}
			// What fits is left alone: 4 x 30 MiB for a second.
			res = run(t, r, Spec{Limits: lim, Timeout: 30 * time.Second, Command: strings.ReplaceAll(bomb, "150 << 20", "30 << 20")})
			if res.Limit != "" || !strings.Contains(string(res.Stdout), "survived") {
				t.Errorf("4 x 30 MiB under 256 MiB with %s: limit %q, exit %d, %s %s", res.Mechanism, res.Limit, res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

// reexecAs runs the tests matching run in a copy of this test binary as
// uid (and gid) uid, from a directory it may use, and fails if they fail.
func reexecAs(t *testing.T, uid int, run string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "apodex-uid-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", uid, out)
	if err != nil {
		t.Fatalf("as uid %d: %v", uid, err)
	}
}

// waitNoProcess waits (up to 10 s) until no process has cmdline.
func waitNoProcess(t *testing.T, cmdline []byte) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		alive := false
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Equal(b, cmdline) {
				alive = true
				break
			}
		}
		if !alive {
			return
		}
	}
}
