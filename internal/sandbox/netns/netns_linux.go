package netns

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/spec"
	"golang.org/x/sys/unix"
)

// An outbound network of a root runtime (issue 25 F9): pasta must not run
// as host root, and a process that is not root can wire out only a network
// namespace whose user namespace it owns. So the namespace is made apart
// from the sandbox, by a maker running as the sandbox uid: the runtime
// starts the maker (the running binary, executed through a descriptor, so
// a binary in a directory closed to that uid works) as spec.SandboxUID; it
// starts its child in a new user namespace (its uid as 0, owned by the
// sandbox uid) and a new network namespace, where the child installs the
// rules (rules_linux.go) and holds the namespaces until the runtime has
// opened them and pasta, running as the sandbox uid, has wired them out.
// The sandbox's helper (or live server) is then started on a thread that
// entered that network namespace, and keeps it: it makes none of its own.
//
// A runtime that is not root makes the network namespace with the
// sandbox's own user namespace, as before, and the helper or server
// installs the rules there itself.

// netnsEnv marks the maker ("parent") and its child ("child"); the rules
// are in netnsRulesEnv.
const (
	netnsEnv      = "APODEX_SANDBOX_NETNS"
	netnsRulesEnv = "APODEX_SANDBOX_NETNS_RULES"
)

func init() {
	switch os.Getenv(netnsEnv) {
	case "parent":
		netnsParent()
	case "child":
		netnsChild()
	}
}

// netnsParent starts the child in new user and network namespaces, passes
// on its readiness as the child's pid, and ends with it. Its stdin is the
// runtime's: the child holds it until it closes.
func netnsParent() {
	syscall.Close(3) // the binary it was executed through
	r, w, err := os.Pipe()
	if err != nil {
		spec.Fail("pipe: %v", err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	proc, err := os.StartProcess("/proc/self/exe", []string{"apodex-netns"}, &os.ProcAttr{
		Env:   []string{netnsEnv + "=child", netnsRulesEnv + "=" + os.Getenv(netnsRulesEnv)},
		Files: []*os.File{os.Stdin, w, os.Stderr},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			Pdeathsig:   syscall.SIGKILL,
		},
	})
	w.Close()
	if err != nil {
		spec.Fail("start the network namespace: %v", err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line == "ready\n" {
		fmt.Printf("%d\n", proc.Pid)
	}
	st, err := proc.Wait()
	if err != nil {
		spec.Fail("wait: %v", err)
	}
	os.Exit(st.ExitCode())
}

// netnsChild installs the rules in its network namespace, says so, and
// holds the namespaces until its stdin ends.
func netnsChild() {
	var rules Rules
	if err := json.Unmarshal([]byte(os.Getenv(netnsRulesEnv)), &rules); err != nil {
		spec.Fail("bad network rules: %v", err)
	}
	if err := rules.Apply(); err != nil {
		spec.Fail("network rules: %v", err)
	}
	os.Stdout.WriteString("ready\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// netns is a network namespace made by makeNetns, with its user namespace.
type netns struct {
	pid       int // the maker's child, while it holds them
	user, net *os.File
	hold      io.WriteCloser // the child's stdin
	done      chan struct{}  // closed once the maker is reaped
	once      sync.Once
}

// makeNetns makes a network namespace with rules, in a user namespace that
// uid owns, and returns it held by the maker's child (release lets go).
func makeNetns(rules Rules, uid, gid int) (*netns, error) {
	exe, err := spec.SelfExe()
	if err != nil {
		return nil, err
	}
	bin, err := os.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open the binary for the network namespace: %w", err)
	}
	defer bin.Close()
	raw, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/fd/3")
	cmd.Args = []string{"apodex-netns"}
	cmd.Env = []string{netnsEnv + "=parent", netnsRulesEnv + "=" + string(raw)}
	cmd.ExtraFiles = []*os.File{bin}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	hold, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start the network namespace: %w", err)
	}
	n := &netns{hold: hold, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(n.done)
	}()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	var l string
	select {
	case l = <-line:
	case <-time.After(pastaTimeout):
	}
	if n.pid, err = strconv.Atoi(strings.TrimSpace(l)); err != nil {
		n.close()
		return nil, fmt.Errorf("sandbox: the network namespace was not made: %s", strings.TrimSpace(stderr.String()))
	}
	for _, f := range []struct {
		dst  **os.File
		kind string
	}{{&n.user, "user"}, {&n.net, "net"}} {
		if *f.dst, err = os.Open(fmt.Sprintf("/proc/%d/ns/%s", n.pid, f.kind)); err != nil {
			n.close()
			return nil, fmt.Errorf("sandbox: open the network namespace: %w", err)
		}
	}
	return n, nil
}

// release lets the maker go; the namespaces stay while n is open.
func (n *netns) release() {
	n.once.Do(func() { n.hold.Close() })
}

// close releases the maker, waits for it and closes the namespaces.
func (n *netns) close() {
	if n == nil {
		return
	}
	n.release()
	select {
	case <-n.done:
	case <-time.After(2 * time.Second):
	}
	for _, f := range []*os.File{n.user, n.net} {
		if f != nil {
			f.Close()
		}
	}
}

// inNetns runs start (a process's start) on a thread in the network
// namespace net, so the process begins in it; the thread then returns to
// the runtime's own namespace.
func inNetns(net *os.File, start func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		if err := unix.Setns(int(net.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("sandbox: enter the network namespace: %w", err)
			return
		}
		err = start()
		if berr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); berr != nil {
			// Never let this thread run anything else; it stays parked
			// (its end would signal the process started from it).
			errc <- errors.Join(err, fmt.Errorf("sandbox: return to the runtime's network namespace: %w", berr))
			select {}
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}
