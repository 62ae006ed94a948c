package worktree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowerDir is where a view's lower layer is bound, idmapped, under its base.
const lowerDir = "lower"

// idmapLower binds lower read-only at base/lower through an idmapped mount
// (Linux 5.12; the overlay takes it as a layer from 5.19) on which the
// files owned by lower's owner appear owned by uid:gid, and returns that
// directory. The store's inodes are not touched: the idmap lives in the
// mount, and the mount is read-only, so nothing is written through it.
// Files of any other owner show as the overflow id and stay unwritable.
func idmapLower(lower, base string, uid, gid int) (string, error) {
	fi, err := os.Stat(lower)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("idmap: no owner for %s", lower)
	}
	ns, err := usernsFor(int(st.Uid), int(st.Gid), uid, gid)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(base, lowerDir)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return "", err
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, lower, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("idmap: open_tree %s: %w", lower, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return "", fmt.Errorf("idmap: mount_setattr %s: %w", lower, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("idmap: move_mount %s: %w", dst, err)
	}
	return dst, nil
}

type idPair struct{ fromUID, fromGID, toUID, toGID int }

var (
	usernsMu sync.Mutex
	usernses = map[idPair]*os.File{} // one per mapping, kept for the process
)

// usernsFor is a user namespace whose uid_map is "fromUID toUID 1" (and
// gid_map alike): an idmapped mount with it shows an inode owned by
// fromUID on disk as owned by toUID, and stores toUID's writes as fromUID.
// It is made once per process by a child that stops at its exec (ptrace:
// it runs none of its code) and is killed once its namespace is held open.
func usernsFor(fromUID, fromGID, toUID, toGID int) (*os.File, error) {
	key := idPair{fromUID, fromGID, toUID, toGID}
	usernsMu.Lock()
	defer usernsMu.Unlock()
	if f := usernses[key]; f != nil {
		return f, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread() // the ptrace tracer is this thread
	defer runtime.UnlockOSThread()
	cmd := exec.Command(exe)
	cmd.Args = []string{"apodex-userns"}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: fromUID, HostID: toUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: fromGID, HostID: toGID, Size: 1}},
		Ptrace:      true, // stopped at exec: it runs none of its code
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("idmap: user namespace: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("idmap: user namespace: %w", err)
	}
	usernses[key] = f
	return f, nil
}
