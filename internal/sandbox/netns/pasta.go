// Package netns gives a sandboxed command an outbound-only network
// (Spec.Outbound): a network namespace of its own, wired out by pasta
// (never running as root), whose policy-routing rules refuse private,
// link-local, shared and multicast destinations but the allowed prefixes
// and the resolvers' port 53, with no way to the host's loopback. For a
// root runtime the namespace is made apart by a maker running as the
// sandbox uid (netns_linux.go); otherwise the sandbox's first process
// installs the rules (Rules.Apply) in the namespace it creates. Any program
// importing this package serves as the maker through its init.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Outbound network (Spec.Outbound): the command gets its own network
// namespace, connected to the outside by pasta (the user-mode stack of
// Debian's passt package) running on the host, never as root. pasta
// forwards no port in either direction and does not map the gateway to
// the host's loopback, so the command reaches other machines but not the
// host's 127.0.0.1 services, and abstract unix sockets stay per-namespace;
// the namespace's rules (rules_linux.go) refuse private, link-local and
// other non-public destinations.

// PastaPath finds pasta; "" when it is not installed.
func PastaPath() string {
	for _, p := range []string{"pasta"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if _, err := os.Stat("/usr/bin/pasta"); err == nil {
		return "/usr/bin/pasta"
	}
	return ""
}

// ErrNoPasta says outbound networking needs pasta.
var errNoPasta = fmt.Errorf("sandbox: --network needs pasta for an outbound-only network (apt-get install -y passt), or use --network host to share the host's network")

// pastaTimeout bounds pasta's setup.
const pastaTimeout = 10 * time.Second

// pastaArgs are pasta's arguments for the network namespace at fd 3 of
// the user namespace at fd 4: no port forwarded either way, no gateway
// mapped to the host.
func pastaArgs() []string {
	return []string{"--foreground", "--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw",
		"--netns", "/proc/self/fd/3", "--userns", "/proc/self/fd/4"}
}

// startPasta connects the network namespace of pid, whose user namespace
// it joins, to the outside; the returned stop ends pasta. pasta runs as
// cred (nil: as the runtime, which is then not root) in the foreground as
// a child of the runtime with a parent-death signal, so it never outlives
// it; it is ready once the namespace has routes.
func startPasta(pid int, cred *syscall.Credential) (stop func(), err error) {
	path := PastaPath()
	if path == "" {
		return nil, errNoPasta
	}
	if cred == nil && os.Geteuid() == 0 {
		return nil, errors.New("sandbox: pasta would run as root")
	}
	var files []*os.File
	for _, kind := range []string{"net", "user"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil {
			return nil, fmt.Errorf("sandbox: pasta: %w", err)
		}
		defer f.Close()
		files = append(files, f)
	}
	cmd := exec.Command(path, pastaArgs()...)
	cmd.ExtraFiles = files
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start pasta: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	routes := fmt.Sprintf("/proc/%d/net/route", pid)
	deadline := time.Now().Add(pastaTimeout)
	for {
		if b, err := os.ReadFile(routes); err == nil && strings.Count(string(b), "\n") > 1 {
			return stop, nil
		}
		select {
		case err := <-done:
			done <- err
			return nil, fmt.Errorf("sandbox: pasta could not set up the network: %v: %s", err, strings.TrimSpace(stderr.String()))
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("sandbox: pasta did not set up the network within %s: %s", pastaTimeout, strings.TrimSpace(stderr.String()))
		}
	}
}

// Outbound is a command's (or a live sandbox's) outbound network: for a
// root runtime a namespace made apart and already wired out (ns), else the
// rules the helper or server installs in the namespace it makes, which
// pasta wires out once it has started.
type Outbound struct {
	ns    *netns
	rules *Rules
	stop  func()
}

// NewOutbound prepares an outbound network with rules.
func NewOutbound(drop bool, rules Rules) (*Outbound, error) {
	if !drop {
		return &Outbound{rules: &rules, stop: func() {}}, nil
	}
	ns, err := makeNetns(rules, spec.SandboxUID, spec.SandboxGID)
	if err != nil {
		return nil, err
	}
	stop, err := startPasta(ns.pid, &syscall.Credential{Uid: spec.SandboxUID, Gid: spec.SandboxGID, Groups: []uint32{}})
	if err != nil {
		ns.close()
		return nil, err
	}
	ns.release()
	return &Outbound{ns: ns, stop: stop}, nil
}

// Rules are the rules the sandbox's first process installs in the
// namespace it makes (nil: the namespace was made apart, rules included).
func (o *Outbound) Rules() *Rules { return o.rules }

// Joined says the sandbox starts in the namespace made apart.
func (o *Outbound) Joined() bool { return o != nil && o.ns != nil }

// Start runs a sandbox's start: in the namespace made apart, if any.
func (o *Outbound) Start(start func() error) error {
	if !o.Joined() {
		return start()
	}
	return inNetns(o.ns.net, start)
}

// Started wires out the namespace of the sandbox's first process, pid,
// when it made its own.
func (o *Outbound) Started(pid int) error {
	if o == nil || o.Joined() {
		return nil
	}
	stop, err := startPasta(pid, nil)
	if err != nil {
		return err
	}
	o.stop = stop
	return nil
}

// Close ends pasta and lets the namespace go.
func (o *Outbound) Close() {
	if o == nil {
		return
	}
	o.stop()
	o.ns.close()
}
