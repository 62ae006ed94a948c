package native

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/spec"
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

// installFilter installs the command's seccomp filter (commandFilter) on
// this thread, with no_new_privs, which the filter needs.
func installFilter(noTrace bool) {
	fprog := CommandFilter(noTrace)
	if fprog == nil {
		return
	}
	const prSetNoNewPrivs, prSetSeccomp, modeFilter = 38, 22, 2
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		spec.Fail("no_new_privs: %v", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, modeFilter, uintptr(fprog)); e != 0 {
		spec.Fail("seccomp: %v", e)
	}
}

// bpf is one classic BPF instruction, a struct sock_filter.
type bpf struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// filterProg is the seccomp filter every sandboxed command runs under (nil
// on architectures other than amd64 and arm64, which get none); with
// noTrace, Spec.NoTrace's (a verifier's). The native helper installs it
// before the command's exec, bubblewrap gets it through --seccomp, a live
// sandbox's command's pid 1 installs it. It refuses:
//   - every system call of another ABI than the native one (on amd64 the
//     32-bit ABI of int $0x80 and sysenter, and x32; on arm64 AArch32):
//     the process is killed (SIGSYS), so no rule below, written for the
//     native numbers, is sidestepped by another ABI's. Nothing asks for
//     these ABIs; running 32-bit programs would need an option that lets
//     them through with rules of their own;
//   - new user namespaces: unshare and clone with CLONE_NEWUSER fail with
//     EPERM, clone3 (whose flags a filter cannot read) with ENOSYS, so
//     libc falls back to clone;
//   - io_uring (setup, enter, register) with ENOSYS, as on a kernel
//     without it: its operations run without passing this filter;
//   - ioctl TIOCSTI and TIOCLINUX, which type into a terminal (or paste
//     its selection), with EPERM, on any descriptor;
//   - fallocate that allocates (every mode but punching a hole or
//     collapsing a range) with EOPNOTSUPP, as on a file system without
//     it: preallocation would take a plane's quota in one call, faster
//     than the quota is measured (glibc's posix_fallocate falls back to
//     writing, which the quotas see);
//   - with noTrace, the calls that reach into another process's memory,
//     registers or descriptors (ptrace, process_vm_readv and _writev,
//     pidfd_getfd) with EPERM.
func filterProg(noTrace bool) []bpf {
	if noTrace {
		return noTraceProg()
	}
	return commandProg()
}

var (
	commandProg = sync.OnceValue(func() []bpf { return buildFilter(false) })
	noTraceProg = sync.OnceValue(func() []bpf { return buildFilter(true) })
)

// sysNums are the system call numbers the filter names, by architecture.
type sysNums struct {
	arch                                uint32 // AUDIT_ARCH_*
	ioctl, unshare, clone, fallocate    uint32
	ptrace, vmRead, vmWrite, pidfdGetfd uint32
	x32                                 bool
}

func buildFilter(noTrace bool) []bpf {
	var n sysNums
	switch runtime.GOARCH {
	case "amd64":
		n = sysNums{arch: 0xc000003e, ioctl: 16, unshare: 272, clone: 56, fallocate: 285,
			ptrace: 101, vmRead: 310, vmWrite: 311, pidfdGetfd: 438, x32: true}
	case "arm64":
		n = sysNums{arch: 0xc00000b7, ioctl: 29, unshare: 97, clone: 220, fallocate: 47,
			ptrace: 117, vmRead: 270, vmWrite: 271, pidfdGetfd: 438}
	default:
		return nil
	}
	const (
		ldAbs    = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jeq      = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		jge      = 0x35
		jset     = 0x45
		ret      = 0x06
		allow    = 0x7fff0000
		errno    = 0x00050000
		kill     = 0x80000000 // SECCOMP_RET_KILL_PROCESS (before Linux 4.14: the thread)
		offNr    = 0          // struct seccomp_data
		offArch  = 4
		offArg0  = 16 // the low half, little-endian
		offArg1  = 24
		x32Bit   = 0x40000000
		clone3   = 435
		uringMin = 425 // io_uring_setup, io_uring_enter, io_uring_register
		uringMax = 427
		tiocsti  = 0x5412
		tioclin  = 0x541c
		// fallocate modes that free space: FALLOC_FL_PUNCH_HOLE,
		// FALLOC_FL_COLLAPSE_RANGE.
		freeing    = 0x02 | 0x08
		eopnotsupp = errno | uint32(syscall.EOPNOTSUPP)
		newUser    = syscall.CLONE_NEWUSER
		eperm      = errno | uint32(syscall.EPERM)
		enosys     = errno | uint32(syscall.ENOSYS)
	)
	p := []bpf{
		{ldAbs, 0, 0, offArch},
		{jeq, 1, 0, n.arch},
		{ret, 0, 0, kill},
		{ldAbs, 0, 0, offNr},
	}
	if n.x32 {
		p = append(p, bpf{jge, 0, 1, x32Bit}, bpf{ret, 0, 0, kill})
	}
	p = append(p,
		bpf{jeq, 0, 1, clone3},
		bpf{ret, 0, 0, enosys},
		// io_uring: uringMin <= nr <= uringMax.
		bpf{jge, 0, 2, uringMin},
		bpf{jge, 1, 0, uringMax + 1},
		bpf{ret, 0, 0, enosys},
	)
	if noTrace {
		for _, nr := range []uint32{n.ptrace, n.vmRead, n.vmWrite, n.pidfdGetfd} {
			p = append(p, bpf{jeq, 0, 1, nr}, bpf{ret, 0, 0, eperm})
		}
	}
	p = append(p,
		// fallocate: its second argument is the mode.
		bpf{jeq, 0, 4, n.fallocate},
		bpf{ldAbs, 0, 0, offArg1},
		bpf{jset, 0, 1, freeing},
		bpf{ret, 0, 0, allow},
		bpf{ret, 0, 0, eopnotsupp},
		// unshare, clone: their first argument holds the flags.
		bpf{jeq, 1, 0, n.unshare},
		bpf{jeq, 0, 4, n.clone},
		bpf{ldAbs, 0, 0, offArg0},
		bpf{jset, 0, 1, newUser},
		bpf{ret, 0, 0, eperm},
		bpf{ret, 0, 0, allow},
		// ioctl: its second argument is the request, 32 bits to the
		// kernel.
		bpf{jeq, 0, 5, n.ioctl},
		bpf{ldAbs, 0, 0, offArg1},
		bpf{jeq, 2, 0, tiocsti},
		bpf{jeq, 1, 0, tioclin},
		bpf{ret, 0, 0, allow},
		bpf{ret, 0, 0, eperm},
		bpf{ret, 0, 0, allow},
	)
	return p
}

// CommandFilter is filterProg as a struct sock_fprog for prctl (nil where
// there is none); it stays valid as long as it is referenced.
func CommandFilter(noTrace bool) unsafe.Pointer {
	p := filterProg(noTrace)
	if p == nil {
		return nil
	}
	return unsafe.Pointer(&struct {
		n      uint16
		_      [6]byte
		filter *bpf
	}{n: uint16(len(p)), filter: &p[0]})
}

// filterBytes is filterProg as bubblewrap's --seccomp reads it (nil where
// there is none).
func filterBytes(noTrace bool) []byte {
	p := filterProg(noTrace)
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), len(p)*int(unsafe.Sizeof(p[0])))
}
