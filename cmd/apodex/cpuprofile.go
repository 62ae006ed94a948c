//go:build apodexprof

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Built with -tags apodexprof (BenchmarkSteps30 does when
// APODEX_PROFILE_DIR is set), the binary writes a CPU profile of the whole
// process to $APODEX_CPUPROFILE. Release builds have no such hook.
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
	atExit = func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
