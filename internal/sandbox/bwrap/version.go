package bwrap

import (
	"os/exec"
	"strings"
	"sync"
)

var versionOnce = sync.OnceValue(func() string {
	out, err := exec.Command("bwrap", "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

// Version is bubblewrap's version line ("bubblewrap 0.8.0"), or "" when it
// is not installed. It is recorded with every run.
func Version() string { return versionOnce() }
