package doctor

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// sysLandlockCreateRuleset is landlock_create_ruleset(2), the same number
// on every architecture Go supports on Linux.
const sysLandlockCreateRuleset = 444

func nativeChecks() []Check {
	return []Check{namespaceCheck(), landlockCheck(), cgroupCheck()}
}

// namespaceCheck starts `true` in new user and mount namespaces.
func namespaceCheck() Check {
	c := Check{Group: "sandbox", Name: "namespaces (user, mount)"}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		c.Status, c.Detail = Fail, "cannot create them: "+err.Error()
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			c.Detail += " (kernel.unprivileged_userns_clone = 0)"
		}
		c.Fix = "sysctl -w kernel.unprivileged_userns_clone=1 (and user.max_user_namespaces > 0); in a container, allow clone(CLONE_NEWUSER)"
		return c
	}
	c.Status, c.Detail = OK, "user and mount namespaces can be created"
	return c
}

// landlockCheck asks the kernel for its Landlock ABI version.
func landlockCheck() Check {
	c := Check{Group: "sandbox", Name: "landlock"}
	const versionFlag = 1 // LANDLOCK_CREATE_RULESET_VERSION
	abi, _, errno := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, versionFlag)
	switch {
	case errno == syscall.ENOSYS:
		c.Status, c.Detail, c.Fix = Warn, "not in this kernel", "Landlock needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK"
	case errno == syscall.EOPNOTSUPP:
		c.Status, c.Detail, c.Fix = Warn, "built in but disabled", "add landlock to the lsm= kernel parameter"
	case errno != 0:
		c.Status, c.Detail = Warn, "unavailable: "+errno.Error()
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("ABI version %d", abi)
	}
	return c
}
