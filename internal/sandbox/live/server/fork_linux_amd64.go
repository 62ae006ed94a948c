package server

import (
	"sync"
	"syscall"
	"unsafe"
)

// On amd64 the command's pid 1 shares the server's memory (CLONE_VM) on a
// stack of its own, and the shell is a vfork of it, so starting a command
// copies no page tables; the memory they use (the rawCmd) is kept alive by
// the server until pid 1 has exited.

const liveStack = 16 << 10

// stacks are the stack pairs of commands that have ended, for reuse.
var stacks = sync.Pool{New: func() any { return make([]byte, 2*liveStack) }}

// cloneInit clones with flags onto the stack whose top is stack; the child
// runs commandInit(r).
func cloneInit(flags, stack uintptr, r *rawCmd) (pid, errno uintptr)

// cloneShell is cloneInit running commandShell.
func cloneShell(flags, stack uintptr, r *rawCmd) (pid, errno uintptr)

// forkInit starts pid 1 (commandInit) with flags.
func forkInit(r *rawCmd, flags uintptr) (uintptr, syscall.Errno) {
	r.stack = stacks.Get().([]byte)
	top := (uintptr(unsafe.Pointer(&r.stack[0])) + liveStack - 64) &^ 15
	pid, e := cloneInit(flags|syscall.CLONE_VM, top, r)
	return pid, syscall.Errno(e)
}

// release gives r's stacks back once its pid 1 has exited.
func (r *rawCmd) release() {
	if r != nil && r.stack != nil {
		stacks.Put(r.stack)
		r.stack = nil
	}
}

// forkShell starts the shell (commandShell) from pid 1 and returns once it
// has exec'd.
//
//go:nosplit
//go:norace
func forkShell(r *rawCmd) (uintptr, syscall.Errno) {
	top := (uintptr(unsafe.Pointer(&r.stack[0])) + 2*liveStack - 64) &^ 15
	pid, e := cloneShell(syscall.CLONE_VM|syscall.CLONE_VFORK|uintptr(syscall.SIGCHLD), top, r)
	return pid, syscall.Errno(e)
}

// sysSetns is setns(2), which package syscall does not name on amd64.
const sysSetns = 308

// Warmable says a warm command is possible here: pid 1 shares the server's memory, so a warm one sees the
// command the server fills in after the fork (warm_linux.go).
const Warmable = true
