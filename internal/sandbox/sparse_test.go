package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/limits"
)

// A sparse file whose apparent size is past its mount's quota is removed
// after the command and named; one under the quota, and real data beside
// it, stay. (Here the workspace is measured, RefuseNear -1; near a hard
// bound the sized overlay keeps no such file either: TestRefusingQuota.)
func TestSparseGiantsRemoved(t *testing.T) {
	for name, r := range trackedOrNot(sandboxes(t)) {
		tracked := strings.HasSuffix(name, "/tracked")
		t.Run(name, func(t *testing.T) {
			ws, out := t.TempDir(), t.TempDir()
			mounts := []Mount{
				{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)},
				{Source: out, Target: "/staged", Writable: true}, // no quota: the workspace's applies
			}
			res := run(t, r, Spec{Mounts: mounts, Limits: Limits{Workspace: Quota{Bytes: 64 << 20, RefuseNear: -1}},
				Command: "truncate -s 20G /workspace/giant && truncate -s 1M /workspace/small && truncate -s 1T /staged/deliverable && echo data > /workspace/ok"})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if res.Limit != LimitSparse || !strings.Contains(res.LimitNote(), "/workspace/giant") || !strings.Contains(res.LimitNote(), "/staged/deliverable") {
				t.Errorf("limit %q note %q", res.Limit, res.LimitNote())
			}
			for _, gone := range []string{filepath.Join(ws, "giant"), filepath.Join(out, "deliverable")} {
				if _, err := os.Lstat(gone); err == nil {
					t.Errorf("%s kept", gone)
				}
			}
			if fi, err := os.Stat(filepath.Join(ws, "small")); err != nil || fi.Size() != 1<<20 {
				t.Errorf("a sparse file under the quota: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "ok")); string(b) != "data\n" {
				t.Errorf("ok = %q", b)
			}
		})
	}
}

// F6 (issue 25): two fallocate calls kept 3 GiB in a workspace with a 50
// MiB quota (preallocation is one call, faster than a measurement).
// Allocating fallocate fails with EOPNOTSUPP in every sandbox now (modes 0,
// KEEP_SIZE, ZERO_RANGE), punching a hole still works, the limit note says
// why, and nothing is kept; glibc's posix_fallocate falls back to writing,
// which a refusing (scratch) quota bounds.
func TestFallocateRefused(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl (its syscall)")
	}
	nr := map[string]int{"amd64": 285, "arm64": 47}[runtime.GOARCH]
	if nr == 0 {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	const size = 256 << 20
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			ws, scratch := t.TempDir(), t.TempDir()
			q := &Quota{Bytes: 16 << 20, Apparent: true, Refuse: true, Name: "scratch_quota", Hint: "--scratch-quota"}
			mounts := []Mount{
				{Source: ws, Target: "/workspace", Writable: true},
				{Source: scratch, Target: "/scratch", Writable: true, Quota: q},
			}
			lim := Limits{Workspace: Quota{Bytes: 16 << 20}}
			res := run(t, r, Spec{Mounts: mounts, Limits: lim, Command: fmt.Sprintf(`cd /workspace
fallocate -l %[1]d a; echo "a=$?"; fallocate -l %[1]d b; echo "b=$?"
echo data > p
perl -e 'open(my $f, "+<", "p") or die; for my $m (1, 16, 3) { my $r = syscall(%[2]d, fileno($f), $m, 0, %[1]d); print "mode$m=", ($r == -1 ? $!+0 : "ok"), "\n" }'`, size, nr)})
			for _, want := range []string{"a=1", "b=1", "mode1=95", "mode16=95", "mode3=ok"} {
				if !strings.Contains(string(res.Stdout), want+"\n") {
					t.Errorf("want %s in\n%s%s", want, res.Stdout, res.Stderr)
				}
			}
			if !strings.Contains(res.LimitNote(), "fallocate") {
				t.Errorf("the limit note does not say why: %q", res.LimitNote())
			}
			if b, _ := limits.Usage(ws, false); b > 1<<20 {
				t.Errorf("the workspace holds %d bytes after the refused fallocate calls", b)
			}

			res = run(t, r, Spec{Mounts: mounts, Limits: lim, Command: fmt.Sprintf(`fallocate -l %[1]d /scratch/c; echo "c=$?"
command -v python3 >/dev/null || exit 0
python3 -c 'import os; fd = os.open("/scratch/d", os.O_WRONLY | os.O_CREAT); os.posix_fallocate(fd, 0, %[1]d)'; echo "d=$?"`, size)})
			if !strings.Contains(string(res.Stdout), "c=1\n") {
				t.Errorf("fallocate in scratch: %s%s", res.Stdout, res.Stderr)
			}
			if strings.Contains(string(res.Stdout), "d=") && (!strings.Contains(string(res.Stdout), "d=1\n") || res.Limit != "scratch_quota") {
				t.Errorf("posix_fallocate past the scratch quota: limit %q\n%s%s", res.Limit, res.Stdout, res.Stderr)
			}
			if b, _ := limits.Usage(scratch, true); b > 16<<20 {
				t.Errorf("scratch holds %d bytes, past its 16 MiB quota", b)
			}
		})
	}
}
