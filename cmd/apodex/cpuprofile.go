//go:build apodexprof

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Built with -tags apodexprof (BenchmarkSteps30 does when
// APODEX_PROFILE_DIR is set), the binary writes a CPU profile of the whole
// process to $APODEX_CPUPROFILE and, with $APODEX_MEMPROFILE, the
// allocations profile at exit. Release builds have no such hook.
func init() {
	path := os.Getenv("APODEX_CPUPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "apodex: APODEX_CPUPROFILE: %v\n", err)
		return
	}
	if os.Getenv("APODEX_MEMPROFILE") != "" {
		runtime.MemProfileRate = 4096 // fine enough to account for a short run
	}
	atExit = func() {
		pprof.StopCPUProfile()
		f.Close()
		if mp := os.Getenv("APODEX_MEMPROFILE"); mp != "" {
			if m, err := os.Create(mp); err == nil {
				pprof.Lookup("allocs").WriteTo(m, 0)
				m.Close()
			}
		}
	}
}
