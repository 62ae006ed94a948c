package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/sandbox"
)

// A stdio server's process: its command, environment and mounts, in the
// run's sandbox (or, opted out, on the host).

// systemDirs are where a sandboxed command finds programs on its own.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"}

// stdioTransport starts the server's process in the sandbox (or, opted
// out, on the host) with pipes for its stdio.
func (s *server) stdioTransport() (sdk.Transport, error) {
	spec, runner, err := s.stdioSpec()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	spec.Stdin, spec.Stdout = inR, outW
	ctx, cancel := context.WithCancel(context.Background()) // the hub owns it: Close ends it
	p := &proc{done: make(chan struct{}), cancel: cancel}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	go func() {
		p.res, p.err = runner.Run(ctx, spec)
		inR.Close()
		outW.Close()
		close(p.done)
	}()
	return &sdk.IOTransport{Reader: outR, Writer: inW}, nil
}

// stdioSpec is the command of a stdio server and the runner it runs in.
func (s *server) stdioSpec() (sandbox.Spec, sandbox.Runner, error) {
	c := s.cfg
	expand := func(v string) (string, error) {
		if !c.Expand {
			return v, nil
		}
		return config.ExpandEnv(v, s.env.getenv)
	}
	command, err := expand(c.Command)
	if err != nil {
		return sandbox.Spec{}, nil, fmt.Errorf("command: %w", err)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		if args[i], err = expand(a); err != nil {
			return sandbox.Spec{}, nil, fmt.Errorf("args[%d]: %w", i, err)
		}
	}
	cwd, err := expand(c.Cwd)
	if err != nil {
		return sandbox.Spec{}, nil, fmt.Errorf("cwd: %w", err)
	}
	unsandboxed := s.sandboxKind() == sandbox.KindNone
	var env []string
	if unsandboxed {
		env = []string{"PATH=" + s.env.getenvOr("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME=" + s.env.getenvOr("HOME", "/tmp"), "LANG=C.UTF-8"}
	} else {
		env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp"}
	}
	for _, k := range c.EnvVars {
		if v := s.env.getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		v, err := expand(c.Env[k])
		if err != nil {
			return sandbox.Spec{}, nil, fmt.Errorf("env %s: %w", k, err)
		}
		env = append(env, k+"="+v)
	}
	spec := sandbox.Spec{Env: env, OutputLimit: 64 << 10}
	if cwd != "" && !filepath.IsAbs(cwd) {
		if abs, err := filepath.Abs(cwd); err == nil {
			cwd = abs
		}
	}
	if strings.Contains(command, "/") && !filepath.IsAbs(command) {
		command = filepath.Join(cmpOr(cwd, "."), command)
		if abs, err := filepath.Abs(command); err == nil {
			command = abs
		}
	}
	if filepath.IsAbs(command) {
		if fi, err := os.Stat(command); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return sandbox.Spec{}, nil, fmt.Errorf("the command %s is not an executable file here", command)
		}
	}
	if unsandboxed {
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		spec.Dir = cwd
		spec.Command = "exec " + shellQuote(append([]string{command}, args...))
		return spec, sandbox.None{}, nil
	}
	if s.env.Runner == nil {
		return sandbox.Spec{}, nil, errors.New("no sandbox is available here to run it in; set sandbox = false in its entry to run it on the host, unisolated")
	}
	if filepath.IsAbs(command) && !slices.ContainsFunc(systemDirs, func(d string) bool { return strings.HasPrefix(command, d) }) {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: filepath.Dir(command), Target: "/mcp/command"})
		command = "/mcp/command/" + filepath.Base(command)
	}
	spec.Dir = "/tmp"
	if cwd != "" {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: cwd, Target: "/mcp/cwd"})
		spec.Dir = "/mcp/cwd"
	}
	for _, p := range c.Planes {
		if host := s.env.Planes[p]; host != "" && !slices.Contains(c.Writable, p) {
			spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: host, Target: p})
		}
	}
	for _, w := range c.Writable { // after the planes: a directory below one is mounted over it
		if s.env.Planes["/workspace"] == "" {
			break // no run (apodex mcp list, doctor): nothing to write
		}
		host, err := s.writableDir(w)
		if err != nil {
			return sandbox.Spec{}, nil, err
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: host, Target: w, Writable: true})
	}
	spec.Outbound = c.Network
	spec.Command = "exec " + shellQuote(append([]string{command}, args...))
	return spec, s.env.Runner, nil
}

// writableDir is the host directory of w (/workspace or a directory
// below it), made if missing. No part of it may be a symbolic link: the
// server would write where the link leads. (Servers start before any
// agent runs, so nothing swaps a part for a link meanwhile.)
func (s *server) writableDir(w string) (string, error) {
	ws := s.env.Planes["/workspace"]
	rel := strings.TrimPrefix(strings.TrimPrefix(w, "/workspace"), "/")
	if rel == "" {
		return ws, nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return "", fmt.Errorf("writable %s: %w", w, err)
	}
	defer root.Close()
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			err = root.Mkdir(p, 0o755)
			if err == nil {
				fi, err = root.Lstat(p)
			}
		}
		if err != nil {
			return "", fmt.Errorf("writable %s: %w", w, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("writable %s: /workspace/%s is not a directory (a symbolic link?); it is not mounted writable", w, p)
		}
	}
	return filepath.Join(ws, rel), nil
}

// sandboxKind is what the server runs in: "none" when its entry opted
// out or the run has no isolation, else the run's sandbox.
func (s *server) sandboxKind() string {
	if s.cfg.NoSandbox || s.env.SandboxKind == sandbox.KindNone {
		return sandbox.KindNone
	}
	return s.env.SandboxKind
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// shellQuote joins words for /bin/sh, each single-quoted.
func shellQuote(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
