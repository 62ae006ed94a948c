package command

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// waitExited blocks until the command's process has exited but leaves it
// unreaped (WNOWAIT), so its pid, which is also its process group id, stays
// reserved while the caller kills the rest of the group. It reports
// reaped=false; the caller then calls cmd.Wait.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	const pPID = 1     // idtype_t P_PID
	var info [128]byte // siginfo_t; contents unused
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(cmd.Process.Pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch e {
		case 0:
			return false, nil
		case syscall.EINTR:
			continue
		default:
			return false, e
		}
	}
}
