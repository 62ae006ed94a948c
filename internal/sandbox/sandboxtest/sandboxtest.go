// Package sandboxtest holds what the sandbox's tests share: the isolating
// runners the conformance suite runs on here (Sandboxes: bwrap where
// bubblewrap works, native, which must work wherever the tests run, and a
// live-sandbox pool over each), and finding the host processes a command
// left. Tests only.
package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/netns"
)

// Runners returns every runner the conformance tests apply to here: None
// and the isolating ones.
func Runners(t *testing.T) map[string]sandbox.Runner {
	t.Helper()
	rs := map[string]sandbox.Runner{"none": sandbox.None{}}
	for name, r := range Sandboxes(t) {
		rs[name] = r
	}
	return rs
}

// Sandboxes returns the isolating runners (the conformance suite): bwrap
// where bubblewrap works, and native, which must work everywhere the tests
// run, and each as live sandboxes ("-reuse"). A live pool that could not
// start its sandbox fails the test when it ends.
func Sandboxes(t testing.TB) map[string]sandbox.Runner {
	t.Helper()
	rs := map[string]sandbox.Runner{}
	if err := sandbox.Available(); err != nil {
		t.Logf("bwrap unavailable: %v", err)
	} else {
		rs["bwrap"] = &sandbox.Bwrap{}
	}
	if _, err := sandbox.New(sandbox.KindNative); err != nil {
		t.Fatalf("native sandbox unavailable: %v", err)
	}
	rs["native"] = sandbox.Native{}
	for name, r := range maps.Clone(rs) {
		p := sandbox.Reuse(r).(*sandbox.Pool)
		t.Cleanup(func() {
			if err := p.StartError(); err != nil {
				t.Errorf("%s-reuse: the live sandbox did not start (commands ran per command): %v", name, err)
			}
			_ = p.Close()
		})
		rs[name+"-reuse"] = p
	}
	return rs
}

// Run runs spec on r and fails the test if it could not.
func Run(t *testing.T, r sandbox.Runner, spec sandbox.Spec) sandbox.Result {
	t.Helper()
	res, err := r.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", spec.Command, err)
	}
	return res
}

var tokenSeq atomic.Int64

// SleepToken returns a sleep duration argument that is unique on this host,
// so the process can be found in /proc by its command line.
func SleepToken() string {
	return fmt.Sprintf("1000.%d%04d", os.Getpid(), tokenSeq.Add(1))
}

// ProcsWith lists the host pids whose command line contains token. Zombies
// have an empty command line and are not listed.
func ProcsWith(token string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(token)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// AssertGone fails if a process carrying token is still alive shortly after
// Run returned (a SIGKILLed process may take a moment to be torn down).
func AssertGone(t *testing.T, token string) {
	t.Helper()
	for range 100 {
		if len(ProcsWith(token)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := ProcsWith(token)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Errorf("processes with %s survived: %v", token, pids)
}

// NeedOutbound skips a test that needs an outbound network: pasta,
// /dev/net/tun, and bash for /dev/tcp.
func NeedOutbound(t testing.TB) {
	t.Helper()
	if netns.PastaPath() == "" {
		t.Skip("pasta not installed (apt-get install -y passt)")
	}
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		t.Skipf("pasta cannot open /dev/net/tun here: %v", err)
	} else {
		f.Close()
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
}
