package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The commands an agent is most likely to reach for, in the order they are
// named to it. The absence of the ones marked is said too, since models
// assume them (python, node).
var (
	interpreters = []string{"python3", "python", "node", "perl", "ruby", "php", "Rscript", "java", "go", "gcc", "cc", "make"}
	commonTools  = []string{"bash", "awk", "sed", "grep", "find", "xargs", "sort", "diff", "patch", "jq", "sqlite3", "bc",
		"git", "tar", "gzip", "zip", "unzip", "file", "curl", "wget"}
	sayAbsent    = map[string]bool{"python": true, "python3": true, "node": true, "jq": true, "git": true, "sqlite3": true}
	pythonModule = []string{"numpy", "pandas", "scipy", "yaml", "requests", "pytest"}
)

// offerDirs are where commands in the sandbox are looked up: the host's
// system directories it mounts read-only (PATH=/usr/local/bin:/usr/bin:/bin).
var offerDirs = []string{"/usr/local/bin", "/usr/bin", "/bin"}

var offerOnce = sync.OnceValue(func() string { return offerIn(offerDirs, "/usr/lib", "/usr/local/lib") })

// SandboxOffer says, in two or three sentences, which interpreters and
// common tools a bash command finds, and which often-assumed ones it does
// not (python3 but no python, …). The host is probed once per process.
func SandboxOffer() string { return offerOnce() }

// offerIn probes bins for commands and libs for Python packages.
func offerIn(bins []string, libs ...string) string {
	has := func(name string) bool {
		for _, d := range bins {
			if fi, err := os.Stat(filepath.Join(d, name)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return true
			}
		}
		return false
	}
	var found, tools, absent []string
	for _, n := range interpreters {
		if has(n) {
			found = append(found, n)
		} else if sayAbsent[n] {
			absent = append(absent, n)
		}
	}
	for _, n := range commonTools {
		if has(n) {
			tools = append(tools, n)
		} else if sayAbsent[n] {
			absent = append(absent, n)
		}
	}
	var b strings.Builder
	b.WriteString("Commands find ")
	if len(found) == 0 {
		b.WriteString("no interpreter but /bin/sh")
	} else {
		b.WriteString("these interpreters and compilers: " + strings.Join(found, ", "))
	}
	if len(tools) > 0 {
		b.WriteString("; tools: " + strings.Join(tools, ", "))
	}
	b.WriteString(".")
	if len(absent) > 0 {
		b.WriteString(" Not installed: " + strings.Join(absent, ", ") + ".")
	}
	if has("python3") {
		sites := pythonSites(libs)
		var mods []string
		for _, m := range pythonModule {
			if pythonHas(sites, m) {
				mods = append(mods, m)
			}
		}
		if len(mods) > 0 {
			b.WriteString(" Python packages beyond the standard library: " + strings.Join(mods, ", ") + ".")
		} else {
			b.WriteString(" Python has only its standard library.")
		}
	}
	return b.String()
}

// pythonSites lists the Python 3 package directories under libs
// (dist-packages or site-packages of any python3*), reading each lib once:
// globbing per module read the same directories again for each (4 ms per
// process).
func pythonSites(libs []string) []string {
	var sites []string
	for _, lib := range libs {
		entries, _ := os.ReadDir(lib)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "python3") {
				continue
			}
			for _, sub := range []string{"dist-packages", "site-packages"} {
				d := filepath.Join(lib, e.Name(), sub)
				if fi, err := os.Stat(d); err == nil && fi.IsDir() {
					sites = append(sites, d)
				}
			}
		}
	}
	return sites
}

// pythonHas reports whether a package named mod exists in one of sites.
func pythonHas(sites []string, mod string) bool {
	for _, site := range sites {
		if _, err := os.Stat(filepath.Join(site, mod)); err == nil {
			return true
		}
	}
	return false
}
