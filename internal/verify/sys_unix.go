//go:build unix

package verify

import "syscall"

const nonBlock = syscall.O_NONBLOCK
