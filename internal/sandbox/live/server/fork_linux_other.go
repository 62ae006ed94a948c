//go:build linux && !amd64

package server

import "syscall"

// Elsewhere than amd64 the command's pid 1 and shell are plain forks
// (copies of the server's memory).

// forkInit starts pid 1 (commandInit) with flags.
func forkInit(r *rawCmd, flags uintptr) (uintptr, syscall.Errno) {
	pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 {
		commandInit(r) // never returns
	}
	return pid, e
}

// release is a no-op: nothing is shared.
func (r *rawCmd) release() {}

// forkShell starts the shell (commandShell) from pid 1.
//
//go:nosplit
//go:norace
func forkShell(r *rawCmd) (uintptr, syscall.Errno) {
	pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 {
		commandShell(r) // never returns
	}
	return pid, e
}

const sysSetns = syscall.SYS_SETNS

// Warmable says a warm command is possible here: pid 1 is a copy of the server, which could not fill in a warm
// one's command after the fork (warm_linux.go).
const Warmable = false
