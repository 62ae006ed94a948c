//go:build !linux

package worktree

import (
	"errors"
	"io/fs"
)

// Without Linux overlayfs every worktree is a copy.

const nonBlock = 0

func mount(lower, upper, work, merged string) error {
	return errors.New("overlayfs needs Linux")
}

func unmount(string) error                 { return nil }
func mountsUnder(string) ([]string, error) { return nil, nil }
func isWhiteout(fs.FileInfo) bool          { return false }
func isOpaque(string) bool                 { return false }
func changeTime(fs.FileInfo) int64         { return 0 }
func inode(fs.FileInfo) uint64             { return 0 }
func lockDir(string) (func(), error)       { return func() {}, nil }

const lowerDir = "lower"

func idmapLower(lower, base string, uid, gid int) (string, error) {
	return "", errors.New("idmapped mounts need Linux")
}
