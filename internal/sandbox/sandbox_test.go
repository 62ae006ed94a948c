package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// needBwrap returns a Bwrap runner or skips the test.
func needBwrap(t *testing.T) *Bwrap {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	return &Bwrap{}
}

func TestNew(t *testing.T) {
	if r, err := New("none"); err != nil || r != (None{}) {
		t.Errorf(`New("none") = %v, %v`, r, err)
	}
	if _, err := New("docker"); err == nil {
		t.Error(`New("docker") succeeded`)
	}
	r, err := New("bwrap")
	if avail := Available(); avail != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf(`New("bwrap") = %v, want ErrUnavailable`, err)
		}
	} else if b, ok := r.(*Bwrap); err != nil || !ok || b.Path == "" {
		t.Errorf(`New("bwrap") = %#v, %v`, r, err)
	}
	if r, err := New("native"); err != nil || KindOf(r) != KindNative {
		t.Errorf(`New("native") = %#v, %v`, r, err)
	}
	// auto: bwrap where it works, else native; never none.
	want := KindNative
	if Available() == nil {
		want = KindBwrap
	}
	for _, kind := range []string{"", "auto"} {
		if r, err := New(kind); err != nil || KindOf(r) != want {
			t.Errorf("New(%q) = %#v, %v; want %s", kind, r, err, want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				cmd  string
				want int
			}{
				{"true", 0},
				{"exit 3", 3},
				{"false", 1},
				{"kill -9 $$", 137},
				{"kill -TERM $$", 143},
				{"nosuchcommand-xyz", 127},
			} {
				if res := run(t, r, Spec{Command: tc.cmd}); res.ExitCode != tc.want || res.TimedOut {
					t.Errorf("%q: exit %d timedOut %v, want %d; stderr %q", tc.cmd, res.ExitCode, res.TimedOut, tc.want, res.Stderr)
				}
			}
		})
	}
}

func TestStreamsSeparate(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: "echo out; echo err >&2"})
			if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
				t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			if res.StdoutBytes != 4 || res.StderrBytes != 4 || res.Truncated() {
				t.Errorf("counts %d %d truncated %v", res.StdoutBytes, res.StderrBytes, res.Truncated())
			}
		})
	}
}

func TestOutputCap(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			const total = 200_000_000
			res := run(t, r, Spec{Command: fmt.Sprintf("yes | head -c %d; printf 0123456789abc >&2", total)})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %q", res.ExitCode, res.Stderr)
			}
			want := bytes.Repeat([]byte("y\n"), command.DefaultOutputLimit/2)
			if !bytes.Equal(res.Stdout, want) || res.StdoutBytes != total || !res.Truncated() {
				t.Errorf("stdout kept %d bytes, counted %d", len(res.Stdout), res.StdoutBytes)
			}
			res = run(t, r, Spec{Command: "printf 0123456789abc >&2", OutputLimit: 10})
			if string(res.Stderr) != "0123456789" || res.StderrBytes != 13 {
				t.Errorf("stderr %q counted %d", res.Stderr, res.StderrBytes)
			}
		})
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			child, grandchild := sleepToken(), sleepToken()
			res := run(t, r, Spec{
				Command: fmt.Sprintf("sh -c 'sleep %s' & echo started; sleep %s", grandchild, child),
				Timeout: 300 * time.Millisecond,
			})
			if !res.TimedOut || res.ExitCode != -1 {
				t.Errorf("TimedOut %v exit %d, want true -1", res.TimedOut, res.ExitCode)
			}
			if string(res.Stdout) != "started\n" {
				t.Errorf("output before the kill lost: %q", res.Stdout)
			}
			assertGone(t, child)
			assertGone(t, grandchild)
		})
	}
}

func TestCtxDeadlineIsTimeout(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			res, err := r.Run(ctx, Spec{Command: "sleep 100"})
			if err != nil || !res.TimedOut || res.ExitCode != -1 {
				t.Errorf("got %+v, %v; want TimedOut, exit -1, nil", res, err)
			}
		})
	}
}

func TestCancelStops(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			res, err := r.Run(ctx, Spec{Command: "sleep " + token})
			if !errors.Is(err, context.Canceled) || res.TimedOut || res.ExitCode != -1 {
				t.Errorf("got %+v, %v; want Canceled, exit -1", res, err)
			}
			assertGone(t, token)

			if _, err := r.Run(ctx, Spec{Command: "true"}); !errors.Is(err, context.Canceled) {
				t.Errorf("Run with a done ctx: %v", err)
			}
		})
	}
}

func TestLeftoversKilledAtExit(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			// The background sleep keeps stdout open; Run must not wait for it.
			res := run(t, r, Spec{Command: "sleep " + token + " & echo hi"})
			if res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
				t.Errorf("exit %d stdout %q", res.ExitCode, res.Stdout)
			}
			assertGone(t, token)
		})
	}
}

func TestEscapedProcessDoesNotHang(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			token := sleepToken()
			t.Cleanup(func() {
				for _, pid := range procsWith(token) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			res := run(t, r, Spec{Command: "setsid sleep " + token + " & echo hi"})
			if res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
				t.Errorf("exit %d stdout %q", res.ExitCode, res.Stdout)
			}
			if name != "none" {
				assertGone(t, token) // the PID namespace takes it down
			}
		})
	}
}

func TestEnvIsClean(t *testing.T) {
	t.Setenv("APODEX_TEST_SECRET", "hunter2")
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, Spec{Command: "env"})
			if bytes.Contains(res.Stdout, []byte("hunter2")) {
				t.Errorf("host variable leaked: %s", res.Stdout)
			}
			for _, kv := range spec.DefaultEnv {
				if !bytes.Contains(res.Stdout, []byte(kv+"\n")) {
					t.Errorf("default %s missing from %s", kv, res.Stdout)
				}
			}
			res = run(t, r, Spec{Command: `echo "$FOO|$PATH|$HOME"`, Env: []string{"FOO=a=b", "PATH=/usr/bin:/bin"}})
			if got := string(res.Stdout); got != "a=b|/usr/bin:/bin|\n" {
				t.Errorf("custom env: %q", got)
			}
			if _, err := r.Run(context.Background(), Spec{Command: "true", Env: []string{"NOEQUALS"}}); err == nil {
				t.Error("bad env entry accepted")
			}
		})
	}
}

func TestWritableMountAndDir(t *testing.T) {
	for name, r := range runners(t) {
		t.Run(name, func(t *testing.T) {
			host := t.TempDir()
			if err := os.Mkdir(filepath.Join(host, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			res := run(t, r, Spec{
				Command: "echo made > f && cat f",
				Dir:     "/workspace/sub",
				Mounts:  []Mount{{Source: host, Target: "/workspace", Writable: true}},
			})
			if res.ExitCode != 0 || string(res.Stdout) != "made\n" {
				t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if b, err := os.ReadFile(filepath.Join(host, "sub", "f")); err != nil || string(b) != "made\n" {
				t.Errorf("host file: %q, %v", b, err)
			}
		})
	}
}
