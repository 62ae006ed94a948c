//go:build !linux

package watch

import "errors"

// Without inotify every Sync walks the tree.

func inotifyInit() int                    { return -1 }
func addWatch(int, string) (int32, error) { return 0, errors.New("watch: no inotify") }
func rmWatch(int, int32)                  {}
func drain()                              {}

const (
	inQOverflow = 0x4000
	inIgnored   = 0x8000
	inSelf      = 0xc00
	inWrite     = 0x2 | 0x8
)
