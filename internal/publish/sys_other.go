//go:build !unix

package publish

import (
	"io/fs"
	"os"
)

const openRead = os.O_RDONLY

func linkCount(fs.FileInfo) uint64 { return 1 }
