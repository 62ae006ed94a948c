package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// The confine tool (spec.ConfinePath, in every sandbox): a process inside
// the sandbox — a verifier's test runner — starts the code it checks
// through it, as
//
//	/opt/apodex/confine -hide /tests -hide /report -- PROG ARGS...
//
// and PROG runs under a further Landlock domain: nothing under a hidden
// path can be read, written, listed or executed; and, Landlock keeping a
// domain's processes from those outside it, PROG and what it starts cannot
// ptrace its starter nor open its /proc/PID/mem, environ, fd or cwd, and
// (Linux 6.12 and later, Landlock ABI 6) cannot signal it nor reach an
// abstract unix socket outside its domain. Without Landlock it refuses to
// run PROG (exit spec.HelperExit) rather than run it unconfined. It is the
// running binary, bound read-only; this package's init recognises it by
// its name.

func init() {
	if filepath.Base(os.Args[0]) == filepath.Base(spec.ConfinePath) && os.Getenv(helperEnv) == "" {
		runtime.LockOSThread()
		confineMain(os.Args[1:])
	}
}

const confineUsage = "usage: " + spec.ConfinePath + " [-hide PATH]... [--] PROG [ARG]..."

// confineMain applies the domain to this (locked) thread and execs the
// program; it never returns.
func confineMain(args []string) {
	var hide []string
parse:
	for len(args) > 0 {
		switch a := args[0]; {
		case a == "--":
			args = args[1:]
			break parse
		case a == "-hide" || a == "--hide":
			if len(args) < 2 {
				spec.Fail("%s", confineUsage)
			}
			p := filepath.Clean(args[1])
			if !filepath.IsAbs(p) {
				spec.Fail("confine: -hide %s is not an absolute path", args[1])
			}
			hide, args = append(hide, p), args[2:]
		case strings.HasPrefix(a, "-"):
			spec.Fail("confine: unknown flag %s; %s", a, confineUsage)
		default:
			break parse
		}
	}
	if len(args) == 0 {
		spec.Fail("%s", confineUsage)
	}
	prog, err := exec.LookPath(args[0])
	if err != nil {
		spec.Fail("confine: %v", err)
	}
	if err := confine(hide); err != nil {
		spec.Fail("confine: %v", err)
	}
	err = syscall.Exec(prog, args, os.Environ())
	spec.Fail("confine: exec %s: %v", prog, err)
}

// Landlock's scopes (ABI 6).
const (
	llScopeAbstractUnix = 1 << 0
	llScopeSignal       = 1 << 1
)

// confine restricts this thread (and what it execs) to everything the
// sandbox allowed it but the hidden paths, and scopes signals and
// abstract unix sockets to its domain where the kernel can.
func confine(hide []string) error {
	abi := landlockABI()
	if abi == 0 {
		return fmt.Errorf("the kernel has no Landlock: cannot confine, so not running it")
	}
	all := uint64(llExecute | llWriteFile | llReadFile | llReadDir | llRemoveDir | llRemoveFile | llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym)
	if abi >= 2 {
		all |= llRefer
	}
	if abi >= 3 {
		all |= llTruncate
	}
	if abi >= 5 {
		all |= llIoctlDev
	}
	// struct landlock_ruleset_attr: handled_access_fs, handled_access_net
	// (ABI 4), scoped (ABI 6); the kernel takes the size it knows.
	attr := [3]uint64{all, 0, 0}
	size := uintptr(8)
	if abi >= 6 {
		attr[2], size = llScopeAbstractUnix|llScopeSignal, 24
	}
	rs, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr[0])), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock ruleset: %v", e)
	}
	defer syscall.Close(int(rs))
	if err := grantBut(rs, "/", hide, all); err != nil {
		return err
	}
	const prSetNoNewPrivs = 38
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %v", e)
	}
	if _, _, e := syscall.Syscall(SysLandlockRestrictSelf, rs, 0, 0); e != 0 {
		return fmt.Errorf("landlock restrict: %v", e)
	}
	return nil
}

// grantBut lets ruleset rs grant access beneath dir, but for the hidden
// paths: a directory holding one is not granted itself (it cannot be
// listed), its other entries are.
func grantBut(rs uintptr, dir string, hide []string, access uint64) error {
	if slices.Contains(hide, dir) {
		return nil
	}
	holds := slices.ContainsFunc(hide, func(h string) bool {
		return strings.HasPrefix(h, strings.TrimSuffix(dir, "/")+"/")
	})
	if !holds {
		fi, err := os.Stat(dir)
		if err != nil {
			return nil // gone, or a dangling link: nothing to grant
		}
		if !fi.IsDir() { // a file takes file rights only
			access &= llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev
		}
		return landlockAdd(rs, dir, access)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if err := grantBut(rs, filepath.Join(dir, e.Name()), hide, access); err != nil {
			return err
		}
	}
	return nil
}
