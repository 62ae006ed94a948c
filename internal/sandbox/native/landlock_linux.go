package native

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Landlock (raw syscalls; ABI 1 and later).
const (
	sysLandlockCreateRuleset = 444
	SysLandlockAddRule       = 445
	SysLandlockRestrictSelf  = 446

	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5
)

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, 1)
	if e != 0 {
		return 0
	}
	return int(v)
}

// applyLandlock restricts this thread (and so the command it starts) to
// reading and executing under / and writing only the writable mounts, /tmp,
// /dev/shm and the device nodes.
func applyLandlock(sp SpecPlan) {
	rs, proc, ok := LandlockRules(sp)
	if !ok {
		return
	}
	if err := landlockAdd(rs, "/proc", proc); err != nil {
		spec.Fail("%v", err)
	}
	const prSetNoNewPrivs = 38
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		spec.Fail("no_new_privs: %v", e)
	}
	if _, _, e := syscall.Syscall(SysLandlockRestrictSelf, rs, 0, 0); e != 0 {
		spec.Fail("landlock restrict: %v", e)
	}
	syscall.Close(int(rs))
}

// LandlockRules makes the ruleset of applyLandlock without the rule for
// /proc, whose access it returns (ok false: no Landlock here).
func LandlockRules(sp SpecPlan) (rs uintptr, proc uint64, ok bool) {
	abi := landlockABI()
	if abi == 0 {
		return 0, 0, false
	}
	read := uint64(llExecute | llReadFile | llReadDir)
	write := uint64(llWriteFile | llRemoveDir | llRemoveFile | llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym)
	if abi >= 2 {
		write |= llRefer
	}
	if abi >= 3 {
		write |= llTruncate
	}
	if abi >= 5 {
		write |= llIoctlDev
	}
	handled := read | write
	rs, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&handled)), 8, 0)
	if e != 0 {
		spec.Fail("landlock ruleset: %v", e)
	}
	add := func(path string, access uint64) {
		if err := landlockAdd(rs, path, access); err != nil {
			spec.Fail("%v", err)
		}
	}
	add("/", read)
	writable := []string{"/tmp", "/dev/shm", "/dev/pts"}
	for _, m := range sp.Mounts {
		if m.Writable {
			writable = append(writable, m.Target)
		}
	}
	for _, w := range writable {
		add(w, read|write)
	}
	for _, d := range DevNodes {
		add("/dev/"+d, llWriteFile|llReadFile|(write&(llTruncate|llIoctlDev)))
	}
	return rs, llWriteFile | (write & llTruncate), true
}

// landlockAdd lets the ruleset rs grant access beneath path (skipped when
// path does not exist).
func landlockAdd(rs uintptr, path string, access uint64) error {
	fd, err := syscall.Open(path, OPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var attr [12]byte // struct landlock_path_beneath_attr, packed
	*(*uint64)(unsafe.Pointer(&attr[0])) = access
	*(*int32)(unsafe.Pointer(&attr[8])) = int32(fd)
	if _, _, e := syscall.Syscall6(SysLandlockAddRule, rs, 1, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule %s: %v", path, e)
	}
	return nil
}
