package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
)

// sh runs command in the sandbox b and returns the result.
func sh(t *testing.T, b Runner, spec Spec) Result {
	t.Helper()
	return run(t, b, spec)
}

// eachSandbox runs f against every isolating backend (the conformance
// suite: bwrap where it works, and native).
func eachSandbox(t *testing.T, f func(t *testing.T, name string, b Runner)) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) { f(t, name, r) })
	}
}

func TestSandboxNetwork(t *testing.T) {
	eachSandbox(t, func(t *testing.T, name string, b Runner) {
		if _, err := os.Stat("/bin/bash"); err != nil {
			t.Skip("needs bash for /dev/tcp")
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "hello from host")
		}))
		defer srv.Close()
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		cmd := fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3'`, port)

		res := sh(t, b, Spec{Command: cmd})
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "hello from host") {
			t.Errorf("host server reachable without Network: exit %d %q", res.ExitCode, res.Stdout)
		}
		res = sh(t, b, Spec{Command: "cat /proc/net/dev"})
		for _, line := range strings.Split(string(res.Stdout), "\n")[2:] {
			if iface, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && iface != "lo" {
				t.Errorf("interface %q visible without Network", iface)
			}
		}

		res = sh(t, b, Spec{Command: cmd, Network: true})
		if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "hello from host") {
			t.Errorf("with Network: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

func TestSandboxReadOnly(t *testing.T) {
	eachSandbox(t, func(t *testing.T, name string, b Runner) {
		in := t.TempDir()
		if err := os.WriteFile(filepath.Join(in, "data"), []byte("input\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mounts := []Mount{{Source: in, Target: "/inputs"}}
		if res := sh(t, b, Spec{Command: "cat /inputs/data", Mounts: mounts}); string(res.Stdout) != "input\n" {
			t.Fatalf("read-only mount unreadable: %q %q", res.Stdout, res.Stderr)
		}
		for _, cmd := range []string{
			"echo x > /inputs/new",
			"echo x >> /inputs/data",
			"rm /inputs/data",
			"mount -o remount,rw /inputs && echo x > /inputs/new",
			"mount -o remount,rw,bind /inputs && echo x > /inputs/new",
			"touch /etc/x", "touch /usr/x", "touch /usr/local/x", "touch /bin/x", "mkdir /newdir",
			"echo x > /etc/passwd",
			"mount -t tmpfs none /tmp",
			"unshare -n true",
		} {
			if res := sh(t, b, Spec{Command: cmd, Mounts: mounts}); res.ExitCode == 0 {
				t.Errorf("%q succeeded", cmd)
			}
		}
		for _, cmd := range []string{"unshare -r true", "unshare -U true", `python3 -c "import os; os.unshare(0x10000000)"`} {
			if res := sh(t, b, Spec{Command: cmd}); res.ExitCode == 0 {
				t.Errorf("nested user namespace created: %q", cmd)
			}
		}
		if res := sh(t, b, Spec{Command: "sh -c 'echo child' && (echo sub)"}); string(res.Stdout) != "child\nsub\n" {
			t.Errorf("plain forks broken: %q %q", res.Stdout, res.Stderr)
		}
		if ents, _ := os.ReadDir(in); len(ents) != 1 {
			t.Errorf("read-only source changed: %v", ents)
		}
		res := sh(t, b, Spec{Command: "grep CapEff /proc/self/status"})
		if !strings.Contains(string(res.Stdout), "0000000000000000") {
			t.Errorf("capabilities kept: %q", res.Stdout)
		}
	})
}

func TestSandboxHidesHost(t *testing.T) {
	eachSandbox(t, func(t *testing.T, name string, b Runner) {
		hostTmp, err := os.CreateTemp("", "apodex-sbx-visible-*")
		if err != nil {
			t.Fatal(err)
		}
		hostTmp.Close()
		t.Cleanup(func() { os.Remove(hostTmp.Name()) })

		for _, p := range []string{"/root", "/home", "/etc/shadow", "/etc/ssl/private", "/run", "/var", "/sys", "/work", hostTmp.Name()} {
			if res := sh(t, b, Spec{Command: "ls " + p}); res.ExitCode == 0 {
				t.Errorf("%s visible: %q", p, res.Stdout)
			}
		}
		for _, p := range []string{"/etc/passwd", "/etc/resolv.conf", "/bin/sh", "/usr/bin/env"} {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if res := sh(t, b, Spec{Command: "test -e " + p}); res.ExitCode != 0 {
				t.Errorf("%s missing", p)
			}
		}
		if res := sh(t, b, Spec{Command: "stat -c %a /etc"}); string(res.Stdout) != "755\n" {
			t.Errorf("/etc modes %q %q", res.Stdout, res.Stderr)
		}
		if res := sh(t, b, Spec{Command: "hostname"}); string(res.Stdout) != "sandbox\n" {
			t.Errorf("hostname %q", res.Stdout)
		}
		if res := sh(t, b, Spec{Command: "echo $$"}); string(res.Stdout) == fmt.Sprint(os.Getpid()) {
			t.Error("shares the PID namespace")
		}
	})
}

func TestSandboxPrivateTmp(t *testing.T) {
	eachSandbox(t, func(t *testing.T, _ string, b Runner) {
		name := filepath.Base(t.TempDir()) + "-inside"
		res := sh(t, b, Spec{Command: "echo x > /tmp/" + name + " && cat /tmp/" + name + " && pwd"})
		if res.ExitCode != 0 || string(res.Stdout) != "x\n/tmp\n" {
			t.Fatalf("exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if _, err := os.Stat(filepath.Join(os.TempDir(), name)); err == nil {
			t.Error("sandbox /tmp is the host's /tmp")
		}
		if res := sh(t, b, Spec{Command: "ls /tmp/" + name}); res.ExitCode == 0 {
			t.Error("/tmp survives between runs")
		}
	})
}

func TestSandboxNestedMounts(t *testing.T) {
	eachSandbox(t, func(t *testing.T, name string, b Runner) {
		out, scratch := t.TempDir(), t.TempDir()
		// Given child first: Run must bind the parent first anyway.
		mounts := []Mount{
			{Source: scratch, Target: "/outputs/scratch", Writable: true},
			{Source: out, Target: "/outputs"},
		}
		if _, err := b.Run(context.Background(), Spec{Command: "true", Mounts: mounts}); err == nil || !strings.Contains(err.Error(), "create it on the host") {
			t.Errorf("mount point missing in a read-only mount: %v", err)
		}
		if err := os.Mkdir(filepath.Join(out, "scratch"), 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = []Mount{
			{Source: scratch, Target: "/outputs/scratch", Writable: true},
			{Source: out, Target: "/outputs"},
			{Source: out, Target: "/deep/new/parent", Writable: true},
		}
		res := sh(t, b, Spec{Command: "echo s > /outputs/scratch/s && echo d > /deep/new/parent/d && ! touch /outputs/o", Mounts: mounts})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
		}
		if _, err := os.Stat(filepath.Join(scratch, "s")); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(out, "d")); err != nil {
			t.Error(err)
		}
	})
}

func TestSandboxRejectsBadMounts(t *testing.T) {
	eachSandbox(t, func(t *testing.T, name string, b Runner) {
		dir := t.TempDir()
		for _, m := range []Mount{
			{Source: dir, Target: "relative"},
			{Source: dir, Target: "/"},
			{Source: dir, Target: "/tmp"},
			{Source: dir, Target: "/usr/local/x"},
			{Source: dir, Target: "/etc"},
			{Source: dir, Target: "/proc/x"},
			{Source: dir, Target: "/a/../usr"},
			{Source: "rel", Target: "/a"},
			{Source: filepath.Join(dir, "missing"), Target: "/a"},
		} {
			if _, err := b.Run(context.Background(), Spec{Command: "true", Mounts: []Mount{m}}); err == nil {
				t.Errorf("mount %+v accepted", m)
			}
		}
	})
}

func BenchmarkBwrapTrue(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	r := &Bwrap{}
	for b.Loop() {
		res, err := r.Run(context.Background(), Spec{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkNoneTrue(b *testing.B) {
	for b.Loop() {
		if _, err := (None{}).Run(context.Background(), Spec{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
