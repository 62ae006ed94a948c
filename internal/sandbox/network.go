package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// stop ends pasta.
func startPasta(pid int, userns bool) (stop func(), err error) {
	path := pastaPath()
	if path == "" {
		return nil, errNoPasta
	}
	dir, err := os.MkdirTemp("", "apodex-pasta-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: pasta: %w", err)
	}
	defer os.RemoveAll(dir)
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("sandbox: pasta: %w", err)
	}
	defer netns.Close()
	files := []*os.File{netns}
	pidFile := filepath.Join(dir, "pid")
	args := []string{"--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw",
		"--pid", pidFile, "--netns", "/proc/self/fd/3"}
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
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start pasta: %w", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(pastaTimeout):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("timed out")
	}
	b, _ := os.ReadFile(pidFile)
	daemon, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	stop = func() {
		if daemon > 0 {
			_ = syscall.Kill(daemon, syscall.SIGKILL)
		}
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("sandbox: pasta could not set up the network: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stop, nil
}
