package spec

import "os"

// SandboxUID and SandboxGID are the host ids sandboxed commands run as when
// the runtime runs as root (nobody/nogroup): never host uid 0. A runtime
// that is not root runs commands as itself.
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// IDs returns the host uid/gid commands run as, and whether the runtime must
// switch to them (it is root).
func IDs() (uid, gid int, drop bool) {
	if os.Geteuid() == 0 {
		return SandboxUID, SandboxGID, true
	}
	return os.Geteuid(), os.Getegid(), false
}
