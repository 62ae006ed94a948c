package sandbox

import (
	"runtime"
	"syscall"
	"unsafe"
)

// dropBoundingSet empties this thread's capability bounding set, so the
// command, even as uid 0 of its user namespace, holds no capability after
// exec.
func dropBoundingSet() {
	const prCapbsetDrop = 24
	for c := 0; c < 64; c++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0); e == syscall.EINVAL {
			break // past the last capability
		}
	}
}

// denyUserns installs a seccomp filter on this thread that refuses new user
// namespaces: unshare and clone with CLONE_NEWUSER fail with EPERM, clone3
// (whose flags a filter cannot read) with ENOSYS, so libc falls back to
// clone. Other architectures than amd64 and arm64 get no filter.
func denyUserns() {
	fprog := usernsFilter()
	if fprog == nil {
		return
	}
	const prSetNoNewPrivs, prSetSeccomp, modeFilter = 38, 22, 2
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		fail("no_new_privs: %v", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, modeFilter, uintptr(fprog)); e != 0 {
		fail("seccomp: %v", e)
	}
}

// usernsFilter is denyUserns's filter, a struct sock_fprog (nil where
// there is none); it stays valid as long as it is referenced.
func usernsFilter() unsafe.Pointer {
	var arch, unshare, clone uint32
	x32 := uint32(0xffffffff)
	switch runtime.GOARCH {
	case "amd64":
		arch, unshare, clone, x32 = 0xc000003e, 272, 56, 0x40000000
	case "arm64":
		arch, unshare, clone = 0xc00000b7, 97, 220
	default:
		return nil
	}
	const (
		ldAbs   = 0x20
		jeq     = 0x15
		jge     = 0x35
		jset    = 0x25 + 0x20
		ret     = 0x06
		allow   = 0x7fff0000
		errno   = 0x00050000
		clone3  = 435
		newUser = syscall.CLONE_NEWUSER
	)
	type insn struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}
	prog := []insn{
		{ldAbs, 0, 0, 4}, // arch
		{jeq, 0, 5, arch},
		{ldAbs, 0, 0, 0}, // syscall number
		{jge, 8, 0, x32},
		{jeq, 7, 0, clone3},
		{jeq, 2, 0, unshare},
		{jeq, 1, 0, clone},
		{ret, 0, 0, allow},
		{ldAbs, 0, 0, 16}, // low half of the first argument: the flags
		{jset, 1, 0, newUser},
		{ret, 0, 0, allow},
		{ret, 0, 0, errno | uint32(syscall.EPERM)},
		{ret, 0, 0, errno | uint32(syscall.ENOSYS)},
	}
	return unsafe.Pointer(&struct {
		n      uint16
		_      [6]byte
		filter *insn
	}{n: uint16(len(prog)), filter: &prog[0]})
}
