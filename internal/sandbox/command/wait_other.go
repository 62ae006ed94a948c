//go:build !linux

package command

import "os/exec"

// waitExited reaps the process directly where waitid(WNOWAIT) is not wired
// up. The group is then still killed on timeout or cancellation, but
// background children of a command that exited normally survive it.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	return true, cmd.Wait()
}
