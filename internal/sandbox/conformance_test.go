package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/sandboxtest"

	"github.com/apodex/apodex/internal/watch"
)

// The tests here run against every isolating backend (sandboxes): they are
// the hardening half of the conformance suite (issue 11).

// hostUID reads the real uid of pid as the host sees it.
func hostUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, _ := strconv.Atoi(strings.Fields(rest)[0])
			return uid
		}
	}
	t.Fatalf("no Uid in status of %d", pid)
	return -1
}

// E1: nothing under /proc/sys opens for writing, and the command's host uid
// is not 0.
func TestNeverHostRoot(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			probe := `n=0; for f in $(find /proc/sys -type f 2>/dev/null) /proc/sysrq-trigger; do n=$((n+1)); if (: >> "$f") 2>/dev/null; then echo "WRITABLE $f"; fi; done; echo "probed $n"; cat /proc/self/uid_map; t=` + strings.Replace(token, ".", "; sleep $t.", 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type out struct {
				res Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := r.Run(ctx, Spec{Command: probe})
				done <- out{res, err}
			}()
			var pids []int
			for range 500 {
				if pids = procsWith(token); len(pids) > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(pids) == 0 {
				cancel()
				o := <-done
				t.Fatalf("sleeper never started: %+v %v", o.res, o.err)
			}
			if uid := hostUID(t, pids[0]); uid == 0 {
				t.Errorf("command runs as host uid 0")
			} else if os.Geteuid() == 0 && uid != SandboxUID {
				t.Errorf("command runs as host uid %d, want %d", uid, SandboxUID)
			}
			cancel()
			o := <-done
			if strings.Contains(string(o.res.Stdout), "WRITABLE") {
				t.Errorf("writable kernel settings:\n%s", o.res.Stdout)
			}
			if !strings.Contains(string(o.res.Stdout), "probed ") || strings.Contains(string(o.res.Stdout), "probed 1\n") {
				t.Errorf("probe did not run: %q %q", o.res.Stdout, o.res.Stderr)
			}
			if o.res.UID != hostUIDOf() {
				t.Errorf("Result.UID %d, want %d", o.res.UID, hostUIDOf())
			}
		})
	}
}

// E3: a setuid copy made in a writable mount keeps no setuid/setgid bit.
func TestNoSetuidSurvives(t *testing.T) {
	for name, r := range trackedOrNot(sandboxes(t)) {
		tracked := strings.HasSuffix(name, "/tracked")
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			res := run(t, r, Spec{Command: "cp /bin/sh /workspace/py && chmod 6755 /workspace/py && mkdir /workspace/d && chmod 2775 /workspace/d && ls -l /workspace/py",
				Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)}}})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			for _, p := range []string{"py", "d"} {
				fi, err := os.Stat(filepath.Join(ws, p))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s keeps %v after the command", p, fi.Mode())
				}
			}
			out := run(t, r, Spec{Command: "grep ' /workspace ' /proc/self/mountinfo", Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)}}})
			if !strings.Contains(string(out.Stdout), "nosuid") || !strings.Contains(string(out.Stdout), "nodev") {
				t.Errorf("/workspace not nosuid,nodev: %q", out.Stdout)
			}
		})
	}
}

// The runtime keeps access to, and the command can change, files the
// runtime wrote.
func TestRuntimeFilesUsable(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "f"), []byte("a"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := run(t, r, Spec{Command: "echo b >> /workspace/f && echo c > /workspace/g", Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true}}})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "ab\n" {
				t.Errorf("f = %q, %v", b, err)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs python3")
	}
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: "for i in $(seq 200); do sleep 30 & done; echo forked", Limits: Limits{Pids: 64}, Timeout: 20 * time.Second})
			if strings.Contains(res.Mechanism, "pids=none") {
				t.Logf("no process limit here (%s): not a root runtime and no delegated cgroup", res.Mechanism)
			} else if strings.Contains(string(res.Stdout), "forked") && res.ExitCode == 0 && res.Limit == "" {
				t.Errorf("pids 64: 200 sleepers forked: %+v", res)
			} else if res.Limit != LimitPids && strings.HasPrefix(Mechanism(Limits{}), "memory=cgroup") {
				t.Errorf("pids limit not reported: %q (%s)", res.Limit, res.Stderr)
			}
			res = run(t, r, Spec{Command: `python3 -c "b = b'x' * (512 << 20); print('allocated')"`, Limits: Limits{Memory: 256 << 20}, Timeout: 20 * time.Second})
			if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "allocated") {
				t.Errorf("memory 256MiB: 512 MiB allocated: %+v", res)
			}
			res = run(t, r, Spec{Command: "dd if=/dev/zero of=/tmp/big bs=1M count=64", Limits: Limits{TmpSize: 16 << 20}})
			if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left") {
				t.Errorf("tmp 16MiB: 64 MiB written: %d %s", res.ExitCode, res.Stderr)
			}
		})
	}
}

// A cancel landing anywhere in the sandbox's startup still kills the
// command.
func TestCancelDuringStartup(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			for i := range 25 {
				token := sleepToken()
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
				_, _ = r.Run(ctx, Spec{Command: "sleep " + token})
				cancel()
				assertGone(t, token)
			}
		})
	}
}

// helperParentEnv makes TestHelperParent run a sandboxed sleeper.
const helperParentEnv = "APODEX_TEST_SANDBOX_PARENT"

// TestHelperParent is not a test: it is the process TestDiesWithRuntime
// SIGKILLs.
func TestHelperParent(t *testing.T) {
	spec := os.Getenv(helperParentEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	kind, token, _ := strings.Cut(spec, ":")
	kind, reuse := strings.CutSuffix(kind, "-reuse")
	r, err := New(kind)
	if err != nil {
		t.Fatal(err)
	}
	if reuse {
		r = Reuse(r)
	}
	_, _ = r.Run(context.Background(), Spec{Command: "sleep " + token})
}

// If the runtime dies, its sandboxed commands die too.
func TestDiesWithRuntime(t *testing.T) {
	for name := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperParent$")
			cmd.Env = append(os.Environ(), helperParentEnv+"="+name+":"+token)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 0; len(procsWith(token)) == 0; i++ {
				if i > 500 {
					_ = cmd.Process.Kill()
					t.Fatal("sleeper never started")
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			assertGone(t, token)
		})
	}
}

func BenchmarkSandboxTrue(b *testing.B) {
	for name, r := range sandboxes(b) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				res, err := r.Run(context.Background(), Spec{Command: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// Outbound: a non-loopback interface is up, but the host's 127.0.0.1
// services are out of reach.
func TestOutboundNetwork(t *testing.T) {
	sandboxtest.NeedOutbound(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "hello from host")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			// Only the sandbox's own loopback is tried: a test sends no
			// packet off the loopback. That the gateway is not mapped to
			// the host's is pasta's --no-map-gw (TestPastaArgs).
			res := run(t, r, Spec{Outbound: true, Command: fmt.Sprintf(`cat /proc/net/dev; cat /proc/net/route; timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/%s && cat <&3" && echo REACHED; true`, port)})
			out := string(res.Stdout)
			if strings.Contains(out, "hello from host") || strings.Contains(out, "REACHED") {
				t.Errorf("host loopback reachable with Outbound: %s", out)
			}
			up := false
			for _, line := range strings.Split(out, "\n") {
				if iface, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && iface != "lo" && !strings.Contains(iface, "|") && !strings.HasPrefix(iface, "Inter") {
					up = true
				}
			}
			if !up || !strings.Contains(out, "00000000") {
				t.Errorf("no outside interface or default route with Outbound: exit %d %s %s", res.ExitCode, out, res.Stderr)
			}
		})
	}
}

// A workspace quota stops a command that grows /workspace past it, and
// what was written before stays.
func TestWorkspaceQuota(t *testing.T) {
	for name, r := range trackedOrNot(sandboxes(t)) {
		tracked := strings.HasSuffix(name, "/tracked")
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			mounts := []Mount{{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)}}
			res := run(t, r, Spec{Command: "echo keep > /workspace/keep; for i in $(seq 100); do head -c 1048576 /dev/urandom > /workspace/f$i; sleep 0.02; done",
				Mounts: mounts, Limits: Limits{Workspace: Quota{Bytes: 4 << 20, RefuseNear: -1}}, Timeout: 30 * time.Second})
			if res.Limit != "workspace_quota" || !strings.Contains(res.LimitNote(), "--workspace-quota") {
				t.Errorf("limit %q note %q", res.Limit, res.LimitNote())
			}
			if _, err := os.Stat(filepath.Join(ws, "f100")); err == nil {
				t.Error("the command was not stopped")
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "keep")); string(b) != "keep\n" {
				t.Error("what was written before the limit was lost")
			}
			res = run(t, r, Spec{Command: "touch /workspace/a /workspace/b /workspace/c", Mounts: mounts, Limits: Limits{Workspace: Quota{Files: 2}}})
			if res.Limit != "workspace_quota" {
				t.Errorf("file count: limit %q", res.Limit)
			}
		})
	}
}

// The runtime's chown before and setuid sweep after a command never reach
// through a link in a writable mount to a host file (a parallel command
// could plant one at any time).
func TestSweepsStayInMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the chown runs for a root runtime only")
	}
	for name, r := range trackedOrNot(sandboxes(t)) {
		tracked := strings.HasSuffix(name, "/tracked")
		t.Run(name, func(t *testing.T) {
			host, ws := t.TempDir(), t.TempDir()
			hostFile := filepath.Join(host, "suid")
			if err := os.WriteFile(hostFile, []byte("x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(hostFile, 0o755|os.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			for link, to := range map[string]string{"file": hostFile, "dir": host} {
				if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
					t.Fatal(err)
				}
			}
			res := run(t, r, Spec{Command: "ls -l /workspace", Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)}}})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			fi, err := os.Stat(hostFile)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSetuid == 0 {
				t.Error("the setuid sweep followed a link to a host file")
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
				t.Errorf("a host file behind a link was given to uid %d", st.Uid)
			}
		})
	}
}

// watchedIf is a Set for a test's watched mounts, closed when the test
// ends; nil (the mount is walked) when tracked is false.
func watchedIf(t *testing.T, tracked bool) *watch.Set {
	if !tracked {
		return nil
	}
	s := watch.NewSet()
	t.Cleanup(s.Close)
	return s
}

// trackedOrNot runs a test over each runner with plain and with watched
// (package watch) writable mounts.
func trackedOrNot(rs map[string]Runner) map[string]Runner {
	out := map[string]Runner{}
	for name, r := range rs {
		out[name+"/walked"], out[name+"/tracked"] = r, r
	}
	return out
}

// On a watched mount, what the runtime writes between two commands is
// given to the sandbox uid before the next one, and a setuid bit a
// command sets on a file that was already there is cleared.
func TestTrackedMountBetweenCommands(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			mounts := []Mount{{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, true)}}
			if res := run(t, r, Spec{Command: "cp /bin/sh /workspace/sh", Mounts: mounts}); res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if err := os.WriteFile(filepath.Join(ws, "runtime.txt"), []byte("r\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, r, Spec{Command: "echo more >> /workspace/runtime.txt && chmod 4755 /workspace/sh", Mounts: mounts})
			if res.ExitCode != 0 {
				t.Fatalf("the command could not change a file the runtime wrote: exit %d: %s", res.ExitCode, res.Stderr)
			}
			fi, err := os.Stat(filepath.Join(ws, "sh"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSetuid != 0 {
				t.Errorf("sh keeps %v after the command", fi.Mode())
			}
		})
	}
}

// A host mount inside a bound directory comes along restricted as the
// command mount holding it says: read-only under a read-only mount,
// writable under a writable one, nosuid and nodev under both. (Needs root
// to mount on the host.)
func TestSubmountsRestricted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting on the host needs root")
	}
	base := t.TempDir()
	in, ws := filepath.Join(base, "in"), filepath.Join(base, "ws")
	for _, d := range []string{filepath.Join(in, "sub"), filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0777,size=1m"); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(d, syscall.MNT_DETACH) })
	}
	mounts := []Mount{{Source: in, Target: "/inputs"}, {Source: ws, Target: "/workspace", Writable: true}}
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Mounts: mounts, Command: `touch /inputs/sub/x 2>/dev/null && echo IN-WRITABLE; touch /workspace/sub/y && echo ws-writable
awk '$5 == "/inputs/sub" || $5 == "/workspace/sub" {print $5, $6}' /proc/self/mountinfo`})
			out := string(res.Stdout)
			if strings.Contains(out, "IN-WRITABLE") || !strings.Contains(out, "ws-writable") {
				t.Errorf("writability of the submounts: %s %s", out, res.Stderr)
			}
			for _, mp := range []string{"/inputs/sub", "/workspace/sub"} {
				var opts string
				for _, line := range strings.Split(out, "\n") {
					if f := strings.Fields(line); len(f) == 2 && f[0] == mp {
						opts = f[1]
					}
				}
				has := func(o string) bool { return slices.Contains(strings.Split(opts, ","), o) }
				if !has("nosuid") || !has("nodev") || has("ro") != (mp == "/inputs/sub") {
					t.Errorf("%s mounted %q; want nosuid,nodev and ro only under /inputs\n%s", mp, opts, out)
				}
			}
		})
	}
}

// The device nodes of /dev are usable and, like every other mount, nosuid.
func TestDevNodesNosuid(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: `echo x > /dev/null && head -c 4 /dev/zero | wc -c && awk '$5 ~ "^/dev/(null|zero|full|random|urandom|tty)$" {print $5, $6}' /proc/self/mountinfo`})
			lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
			if res.ExitCode != 0 || len(lines) < 2 || strings.TrimSpace(lines[0]) != "4" {
				t.Fatalf("devices not usable: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				if len(f) != 2 || !slices.Contains(strings.Split(f[1], ","), "nosuid") {
					t.Errorf("device mount %q is not nosuid", l)
				}
			}
		})
	}
}

// A descriptor the runtime holds without close-on-exec (inherited from
// whatever started it: a host directory, a terminal) does not reach the
// command.
func TestNoStrayDescriptor(t *testing.T) {
	dir := t.TempDir()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const stray = 200
	if err := syscall.Dup3(fd, stray, 0); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	t.Cleanup(func() { syscall.Close(stray) })
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: "ls -l /proc/self/fd/200 2>/dev/null && echo STRAY; echo done"})
			if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "done") {
				t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
			if strings.Contains(string(res.Stdout), "STRAY") {
				t.Errorf("the command holds the runtime's descriptor %d:\n%s", stray, res.Stdout)
			}
		})
	}
}

// F5 (issue 25): SysV shared memory a command creates goes with it, on
// every runner: a live sandbox's commands shared its IPC namespace, so a
// segment stayed allocated after its command, for the next to see.
func TestIPCPerCommand(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ipcmk"); err != nil {
		t.Skip("needs ipcmk and ipcs (util-linux)")
	}
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: "ipcmk -M 1048576 && ipcs -m | grep -c '^0x'"})
			if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) == "" {
				t.Fatalf("ipcmk: exit %d %s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
			res = run(t, r, Spec{Command: "ipcs -m | grep -c '^0x' || true"})
			if n := strings.TrimSpace(string(res.Stdout)); n != "0" {
				t.Errorf("the next command sees %s shared memory segments:\n%s", n, res.Stdout)
			}
		})
	}
}
