//go:build !unix

package workspace

import "io/fs"

const (
	nonBlock = 0
	noFollow = 0
)

func linkCount(fs.FileInfo) uint64 { return 1 }

func inode(fs.FileInfo) uint64 { return 0 }
