package live_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/live"
	"github.com/apodex/apodex/internal/sandbox/live/server"
	"github.com/apodex/apodex/internal/sandbox/sandboxtest"
)

// pools returns a fresh live-sandbox runner over each isolating backend.
func pools(t *testing.T) map[string]*Pool {
	t.Helper()
	out := map[string]*Pool{}
	for name, r := range sandboxtest.Sandboxes(t) {
		if strings.HasSuffix(name, "-reuse") {
			continue
		}
		p := Reuse(r).(*Pool)
		t.Cleanup(func() { _ = p.Close() })
		out[name] = p
	}
	return out
}

var (
	liveCount  = live.LiveCount
	warmStarts = live.WarmStarts
	run        = sandboxtest.Run
	sleepToken = sandboxtest.SleepToken
	procsWith  = sandboxtest.ProcsWith
	assertGone = sandboxtest.AssertGone
)

// Two commands at the same time in one live sandbox see neither each
// other's /tmp nor each other's processes.
func TestLiveCommandsApart(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := make(chan Result, 1)
			go func() {
				res, _ := p.Run(ctx, Spec{Command: "echo one > /tmp/mine; sleep " + token})
				first <- res
			}()
			for i := 0; len(procsWith(token)) == 0; i++ {
				if i > 500 {
					t.Fatal("the first command never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			res := run(t, p, Spec{Command: "ls -A /tmp; echo; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			out := string(res.Stdout)
			if strings.Contains(out, "mine") {
				t.Errorf("the second command sees the first one's /tmp: %s", out)
			}
			if strings.Contains(out, token) {
				t.Errorf("the second command sees the first one's processes: %s", out)
			}
			if n := liveCount(p); n != 1 || live.Used(p) != 1 {
				t.Errorf("live sandboxes %d, commands in them %d; want one sandbox for both", n, live.Used(p))
			}
			cancel()
			if r := <-first; r.ExitCode != -1 {
				t.Errorf("cancelled first command: exit %d", r.ExitCode)
			}
			assertGone(t, token)
		})
	}
}

// A background process of a command is dead when the command returns, and
// a command after a timed-out one runs in the same live sandbox.
func TestLiveCommandEnds(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			res := run(t, p, Spec{Command: "sleep " + token + " & echo started"})
			if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "started") {
				t.Fatalf("exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			assertGone(t, token)
			token = sleepToken()
			res = run(t, p, Spec{Command: "sleep " + token, Timeout: 300 * time.Millisecond})
			if !res.TimedOut || res.ExitCode != -1 {
				t.Errorf("not timed out: %+v", res)
			}
			assertGone(t, token)
			res = run(t, p, Spec{Command: "echo after"})
			if res.ExitCode != 0 || string(res.Stdout) != "after\n" {
				t.Errorf("after a timeout: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if n := liveCount(p); n != 1 || live.Used(p) != 3 {
				t.Errorf("live sandboxes %d, commands in them %d; want 1 and 3", n, live.Used(p))
			}
		})
	}
}

// A Fresh mount (a new source per command, as the publishing holder's
// staging copy) is seen as each command's own, in one live sandbox, with a
// static mount nested in it.
func TestLiveFreshMounts(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			staging, scratch := t.TempDir(), t.TempDir()
			if err := os.Chmod(staging, 0o700); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				dir, err := os.MkdirTemp(staging, "outputs-")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(dir, "scratch"), 0o755); err != nil {
					t.Fatal(err)
				}
				want := filepath.Base(dir)
				if err := os.WriteFile(filepath.Join(dir, "which"), []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				res := run(t, p, Spec{Command: "cat /outputs/which; echo hi > /outputs/new; echo s >> /outputs/scratch/log",
					Mounts: []Mount{{Source: dir, Target: "/outputs", Writable: true, Fresh: true}, {Source: scratch, Target: "/outputs/scratch", Writable: true}}})
				if res.ExitCode != 0 || string(res.Stdout) != want {
					t.Fatalf("command %d: exit %d stdout %q (want %q) stderr %q", i, res.ExitCode, res.Stdout, want, res.Stderr)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "new")); err != nil || string(b) != "hi\n" {
					t.Errorf("command %d: its write to /outputs: %q %v", i, b, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(scratch, "log")); string(b) != "s\ns\ns\n" {
				t.Errorf("scratch = %q", b)
			}
			if n := liveCount(p); n != 1 || live.Used(p) != 3 {
				t.Errorf("live sandboxes %d, commands in them %d; want 1 and 3", n, live.Used(p))
			}
		})
	}
}

// A live sandbox that died is replaced; a command it never started runs
// elsewhere; a shape whose live sandbox cannot start runs per command,
// still sandboxed.
func TestLiveFallback(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			if res := run(t, p, Spec{Command: "true"}); res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if ran, err := live.KillServer(p); err != nil {
				t.Fatal(err)
			} else if ran {
				t.Error("a dead live sandbox ran a command")
			}
			res := run(t, p, Spec{Command: "echo again"})
			if res.ExitCode != 0 || string(res.Stdout) != "again\n" || live.Used(p) != 2 {
				t.Errorf("after the server died: exit %d %q %q, %d in live sandboxes", res.ExitCode, res.Stdout, res.Stderr, live.Used(p))
			}

			defer live.RefuseStarts(p)()
			ws := t.TempDir()
			res = run(t, p, Spec{Command: "cat /proc/self/uid_map; echo x > /workspace/f", Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true}}})
			if res.ExitCode != 0 || res.UID != CommandUID() || res.Mechanism == "" {
				t.Errorf("per command: exit %d uid %d mechanism %q: %s", res.ExitCode, res.UID, res.Mechanism, res.Stderr)
			}
			if live.Used(p) != 2 || p.StartError() == nil {
				t.Errorf("the refused start was not a fallback: used %d, start error %v", live.Used(p), p.StartError())
			}
			live.ForgetStartError(p) // not a failure of the sandbox under test
		})
	}
}

// An idle live sandbox is shut down; the next command starts another.
func TestLiveIdle(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			p.Idle = 50 * time.Millisecond
			run(t, p, Spec{Command: "true"})
			for i := 0; liveCount(p) != 0; i++ {
				if i > 500 {
					t.Fatal("the idle live sandbox stayed up")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if res := run(t, p, Spec{Command: "echo back"}); string(res.Stdout) != "back\n" || live.Used(p) != 2 {
				t.Errorf("after idling: %q %q, %d in live sandboxes", res.Stdout, res.Stderr, live.Used(p))
			}
		})
	}
}

func TestReuseOff(t *testing.T) {
	t.Setenv(ReuseEnv, "0")
	if _, ok := Reuse(Native{}).(*Pool); ok {
		t.Errorf("%s=0: Reuse made a pool", ReuseEnv)
	}
	if got := KindOf(Reuse(WithOptions(Native{}, Options{}))); got != KindNative {
		t.Errorf("KindOf = %q", got)
	}
}

func TestReuseKind(t *testing.T) {
	t.Setenv(ReuseEnv, "")
	for _, r := range []Runner{Native{}, &Bwrap{}} {
		p := Reuse(WithOptions(r, Options{}))
		if KindOf(p) != KindOf(r) {
			t.Errorf("KindOf(Reuse(%T)) = %q", r, KindOf(p))
		}
		if _, ok := Unwrap(p).(*Pool); !ok {
			t.Errorf("Reuse(%T) is %T", r, Unwrap(p))
		}
		if err := Close(p); err != nil {
			t.Error(err)
		}
	}
}

// A command in a live sandbox holds no capability, runs with no_new_privs
// and the seccomp filter, sees nothing of the hidden directory and cannot
// read its pid 1 (which shares the server's memory).
func TestLiveCommandHoldsNothing(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			res := run(t, p, Spec{Command: "grep -E '^(Cap|NoNewPrivs|Seccomp):' /proc/self/status; ls -A /.apodex 2>&1; " +
				"cat /proc/1/maps >/dev/null 2>&1 && echo MAPS-READABLE; head -c1 /proc/1/mem >/dev/null 2>&1 && echo MEM-READABLE; echo done",
				Mounts: []Mount{{Source: ws, Target: "/workspace", Writable: true}}})
			out := string(res.Stdout)
			if res.ExitCode != 0 || !strings.Contains(out, "done") {
				t.Fatalf("exit %d: %q %q", res.ExitCode, out, res.Stderr)
			}
			for _, line := range strings.Split(out, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "Cap") && strings.Trim(strings.TrimSpace(v), "0") != "" {
					t.Errorf("%s", line)
				}
			}
			for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in %q", want, out)
				}
			}
			for _, bad := range []string{"h0", "exe", "MAPS-READABLE", "MEM-READABLE"} {
				if strings.Contains(out, bad) {
					t.Errorf("%q in %q", bad, out)
				}
			}
		})
	}
}

// warmStarts is how many commands of p started on a warm pid 1.
// Commands after the first start on a warm pid 1 (package live/server) and
// are still each their own: their command line, environment, directory and
// exit status, an empty /tmp, none of the previous one's processes, their
// own stdout and stderr; a command with other mounts discards the warm one
// and gets its mounts; a warm-started command can be timed out.
func TestWarmCommands(t *testing.T) {
	if !server.Warmable {
		t.Skip("no warm commands on this architecture")
	}
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.Chmod(ws, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(ws, "sub"), 0o777); err != nil {
				t.Fatal(err)
			}
			mounts := []Mount{{Source: ws, Target: "/workspace", Writable: true}}
			token := sleepToken()
			const n = 6
			for k := range n {
				dir := "/workspace"
				if k%2 == 1 {
					dir = "/workspace/sub"
				}
				res := run(t, p, Spec{Mounts: mounts, Dir: dir, Env: []string{"K=" + strconv.Itoa(k)},
					Command: `ls -A /tmp; echo "k=$K pwd=$(pwd)"; echo err$K >&2; touch /tmp/left$K; (sleep ` + token + ` &); echo $K > /workspace/f$K; exit $K`})
				want := "k=" + strconv.Itoa(k) + " pwd=" + dir + "\n"
				if string(res.Stdout) != want || string(res.Stderr) != "err"+strconv.Itoa(k)+"\n" || res.ExitCode != k {
					t.Fatalf("command %d: exit %d, stdout %q (want %q), stderr %q", k, res.ExitCode, res.Stdout, want, res.Stderr)
				}
				assertGone(t, token)
				if b, err := os.ReadFile(filepath.Join(ws, "f"+strconv.Itoa(k))); err != nil || string(b) != strconv.Itoa(k)+"\n" {
					t.Fatalf("command %d wrote %q, %v", k, b, err)
				}
			}
			if w := warmStarts(p); w < n-2 {
				t.Errorf("%d of %d commands started warm; want all but the first (or two)", w, n)
			}
			// Other mounts: the warm command (for /workspace alone) is not used.
			extra := t.TempDir()
			if err := os.WriteFile(filepath.Join(extra, "seen"), []byte("yes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := warmStarts(p)
			res := run(t, p, Spec{Mounts: append(slices.Clone(mounts), Mount{Source: extra, Target: "/extra"}), Command: "cat /extra/seen; ls /workspace | wc -l"})
			if res.ExitCode != 0 || string(res.Stdout) != "yes\n7\n" {
				t.Fatalf("command with another mount: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			if warmStarts(p) != before {
				t.Errorf("a command with another mount started on the warm command of the previous shape")
			}
			// A warm-started command is timed out like any other.
			run(t, p, Spec{Mounts: mounts, Command: "true"})
			before = warmStarts(p)
			res, err := p.Run(context.Background(), Spec{Mounts: mounts, Command: "sleep " + token, Timeout: 300 * time.Millisecond})
			if err != nil || !res.TimedOut {
				t.Fatalf("timed-out warm command: %+v %v", res, err)
			}
			if warmStarts(p) != before+1 {
				t.Errorf("the timed-out command did not start warm")
			}
			assertGone(t, token)
		})
	}
}

// When a command's status is back, nothing of it runs: a background
// writer has stopped writing and a background forker (which races the
// kill) has left no process behind, on the warm path and the built one.
func TestLiveNothingRunsAfter(t *testing.T) {
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.Chmod(ws, 0o777); err != nil {
				t.Fatal(err)
			}
			mounts := []Mount{{Source: ws, Target: "/workspace", Writable: true}}
			token := sleepToken()
			for k := range 4 {
				res := run(t, p, Spec{Mounts: mounts, Command: `(while :; do echo x >> /workspace/bg; done) & (while :; do sleep ` + token + ` & done) & sleep 0.05; echo started`})
				if res.ExitCode != 0 || string(res.Stdout) != "started\n" {
					t.Fatalf("command %d: exit %d %q %s", k, res.ExitCode, res.Stdout, res.Stderr)
				}
				fi, err := os.Stat(filepath.Join(ws, "bg"))
				if err != nil || fi.Size() == 0 {
					t.Fatalf("command %d: the background writer never wrote: %v", k, err)
				}
				time.Sleep(30 * time.Millisecond)
				if again, err := os.Stat(filepath.Join(ws, "bg")); err != nil || again.Size() != fi.Size() {
					t.Fatalf("command %d: /workspace/bg still grows after the command returned (%d -> %d bytes)", k, fi.Size(), again.Size())
				}
				if left := procsWith(token); len(left) > 0 {
					t.Fatalf("command %d: processes left after it returned: %v", k, left)
				}
				os.Remove(filepath.Join(ws, "bg"))
			}
		})
	}
}

// A command that wrote to a refusing quota's mount leaves less room for
// the next: the warm command made before is resized to what is left, still
// taken, and a write past that is refused.
func TestWarmScratchQuota(t *testing.T) {
	if !server.Warmable {
		t.Skip("no warm commands on this architecture")
	}
	for name, p := range pools(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			q := &Quota{Bytes: 1 << 20, Apparent: true, Refuse: true, Name: "scratch_quota", Hint: "--scratch-quota"}
			mounts := []Mount{{Source: dir, Target: "/scratch", Writable: true, Quota: q}}
			for _, f := range []string{"a", "b"} {
				res := run(t, p, Spec{Mounts: mounts, Command: "head -c 307200 /dev/zero > /scratch/" + f})
				if res.ExitCode != 0 || res.Limit != "" {
					t.Fatalf("write %s: exit %d limit %q: %s", f, res.ExitCode, res.Limit, res.Stderr)
				}
			}
			res := run(t, p, Spec{Mounts: mounts, Command: `head -c 614400 /dev/zero > /scratch/c; echo "c=$?"`})
			if !strings.Contains(string(res.Stdout), "c=1") || !strings.Contains(string(res.Stderr), "No space left") || res.Limit != "scratch_quota" {
				t.Errorf("the write past what was left was not refused: %q %q limit %q", res.Stdout, res.Stderr, res.Limit)
			}
			if fi, err := os.Stat(filepath.Join(dir, "c")); err == nil && fi.Size() > 1<<20-2*307200 {
				t.Errorf("c on the host is %d bytes, more than the quota left", fi.Size())
			}
			if w := warmStarts(p); w < 2 {
				t.Errorf("%d of 3 commands started warm; want the two after the first", w)
			}
		})
	}
}
