//go:build !unix

package verify

const nonBlock = 0
