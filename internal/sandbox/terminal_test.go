package sandbox_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"

	"golang.org/x/sys/unix"
)

// ttyRunnerEnv names, in the test binary re-executed on a terminal, the
// runner whose command tries to type into it.
const ttyRunnerEnv = "APODEX_TEST_TTY_RUNNER"

// injectScript tries TIOCSTI on /dev/tty and on descriptors 0, 1 and 2,
// one line per attempt. The text it types is put together at run time, so
// finding it whole on the terminal means it was typed (echoed), not printed.
const injectScript = `perl -e '
my $s = "ZQ" . "JX\n";
sub inject {
	my ($fh, $what) = @_;
	for my $c (split //, $s) {
		if (!ioctl($fh, 0x5412, $c)) { print "$what: TIOCSTI failed: $!\n"; return }
	}
	print "$what: INJECTED\n";
}
if (open(my $t, "+<", "/dev/tty")) { inject($t, "tty") } else { print "tty: open failed: $!\n" }
for my $fd (0, 1, 2) {
	if (open(my $f, $fd == 0 ? "<&=" : ">&=", $fd)) { inject($f, "fd$fd") } else { print "fd$fd: open failed: $!\n" }
}'`

// F1 (issue 25): a command cannot type into the terminal the runtime runs
// on: it runs in a session of its own, without a controlling terminal
// (and the seccomp filter refuses TIOCSTI, TestSeccompRefuses). The test
// binary is re-executed with a pty as its controlling terminal and stdio;
// there it runs, on each sandbox, a command that tries TIOCSTI on /dev/tty
// (which must not open) and on its stdio, then checks that nothing waits
// in the terminal's input; here nothing typed may show on the pty's master
// (the terminal echoes what is typed).
func TestNoTerminalInjection(t *testing.T) {
	if name := os.Getenv(ttyRunnerEnv); name != "" {
		injectOnTerminal(t, name)
		return
	}
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl (the command's ioctl)")
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range sandboxes(t) {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			master, slave := openPTY(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoTerminalInjection$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), ttyRunnerEnv+"="+name)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			read := make(chan []byte)
			go func() {
				var out bytes.Buffer
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					out.Write(buf[:n])
					if err != nil { // EIO once no one holds the terminal
						read <- out.Bytes()
						return
					}
				}
			}()
			err := cmd.Wait()
			var out []byte
			select {
			case out = <-read:
			case <-time.After(time.Minute):
				t.Fatal("the terminal is still held open after the test binary exited")
			}
			if err != nil {
				t.Errorf("on the terminal: %v\n%s", err, out)
			}
			if bytes.Contains(out, []byte("ZQJX")) || bytes.Contains(out, []byte("INJECTED")) {
				t.Errorf("the command typed into the terminal:\n%s", out)
			}
			if !bytes.Contains(out, []byte("--- PASS: TestNoTerminalInjection")) {
				t.Errorf("the command did not run on the terminal:\n%s", out)
			}
		})
	}
}

// injectOnTerminal is the re-executed side of TestNoTerminalInjection: its
// stdin is the terminal.
func injectOnTerminal(t *testing.T, name string) {
	r, ok := sandboxes(t)[name]
	if !ok {
		t.Fatalf("no runner %q here", name)
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		t.Fatalf("the test binary has no controlling terminal: %v", err)
	}
	tty.Close()
	res := run(t, r, Spec{Command: injectScript})
	t.Logf("exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	for _, what := range []string{"tty", "fd0", "fd1", "fd2"} {
		if !strings.Contains(string(res.Stdout), what+": ") {
			t.Errorf("no attempt on %s reported", what)
		}
	}
	if strings.Contains(string(res.Stdout), "INJECTED") {
		t.Errorf("TIOCSTI succeeded")
	}
	if !strings.Contains(string(res.Stdout), "tty: open failed") {
		t.Errorf("the command has a controlling terminal (/dev/tty opens)")
	}
	n, err := unix.IoctlGetInt(0, unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("%d bytes were typed into the terminal", n)
	}
}

// openPTY opens a pseudo-terminal pair; neither becomes this process's
// controlling terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := slave.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Error(err)
		}
	})
	return master, slave
}
