package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// reserved are sandbox paths a Mount may not cover or sit under.
var reserved = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev"}

// CheckMounts validates mounts and returns them sorted parents first.
func CheckMounts(mounts []Mount) ([]Mount, error) {
	out := slices.Clone(mounts)
	for _, m := range out {
		t := m.Target
		if !filepath.IsAbs(t) || filepath.Clean(t) != t || t == "/" || t == "/tmp" {
			return nil, fmt.Errorf("sandbox: mount target %q must be a clean absolute path other than / and /tmp", t)
		}
		for _, r := range reserved {
			if t == r || strings.HasPrefix(t, r+"/") {
				return nil, fmt.Errorf("sandbox: mount target %q is inside the system directory %s", t, r)
			}
		}
		if !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("sandbox: mount source %q is not absolute", m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return nil, fmt.Errorf("sandbox: mount source: %w", err)
		}
	}
	slices.SortStableFunc(out, func(a, b Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	// bwrap cannot create a mount point inside a read-only bind; say so
	// before it fails with exit code 1.
	for i, m := range out {
		if p, ok := container(out[:i], m.Target); ok && !p.Writable {
			host := filepath.Join(p.Source, strings.TrimPrefix(m.Target, p.Target))
			if _, err := os.Stat(host); err != nil {
				return nil, fmt.Errorf("sandbox: mount target %s is inside read-only mount %s and %s does not exist; create it on the host", m.Target, p.Target, host)
			}
		}
	}
	return out, nil
}

// container returns the deepest mount in ms strictly containing target.
func container(ms []Mount, target string) (Mount, bool) {
	var best Mount
	found := false
	for _, m := range ms {
		if strings.HasPrefix(target, m.Target+"/") && (!found || len(m.Target) > len(best.Target)) {
			best, found = m, true
		}
	}
	return best, found
}
