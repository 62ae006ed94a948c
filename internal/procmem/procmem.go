// Package procmem reads this process's memory figures for benchmarks. It
// guarantees only what /proc says: a figure the kernel does not give here
// is 0.
package procmem

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSS is the process's peak resident set (VmHWM) in MiB. It only
// grows, so a benchmark that reports it measures one size per process.
func PeakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
