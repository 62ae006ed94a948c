package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Outbound network (Spec.Outbound): the command gets its own network
// namespace, connected to the outside by pasta (the user-mode stack of
// Debian's passt package) running on the host. pasta forwards no port in
// either direction and does not map the gateway to the host's loopback, so
// the command reaches other machines but not the host's 127.0.0.1 services,
// and abstract unix sockets stay per-namespace.

// pastaPath finds pasta; "" when it is not installed.
func pastaPath() string {
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

// startPasta connects the network namespace of pid (and, for an
// unprivileged runner, its user namespace) to the outside; the returned
// stop ends pasta. pasta runs in the foreground as a child of the runtime
// with a parent-death signal, so it never outlives it; it is ready once the
// namespace has routes.
func startPasta(pid int, userns bool) (stop func(), err error) {
	path := pastaPath()
	if path == "" {
		return nil, errNoPasta
	}
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("sandbox: pasta: %w", err)
	}
	defer netns.Close()
	files := []*os.File{netns}
	args := []string{"--foreground", "--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw",
		"--netns", "/proc/self/fd/3"}
	if os.Geteuid() == 0 {
		args = append(args, "--runas", "0")
	}
	if userns {
		u, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
		if err != nil {
			return nil, fmt.Errorf("sandbox: pasta: %w", err)
		}
		defer u.Close()
		files = append(files, u)
		args = append(args, "--userns", "/proc/self/fd/4")
	} else {
		args = append(args, "--netns-only")
	}
	cmd := exec.Command(path, args...)
	cmd.ExtraFiles = files
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
