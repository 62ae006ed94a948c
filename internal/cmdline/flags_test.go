package cmdline

import (
	"strings"
	"testing"
)

func TestUnits(t *testing.T) {
	sizes := map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "512k": 512 << 10, "1048576B": 1 << 20, "4096 bytes": 4096, "1 byte": 1, "2MB": 2_000_000, "0": 0}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// A bare number is refused: --scratch-quota 5 silently meant 5 bytes.
	for _, bad := range []string{"", "5", "1048576", "MiB", "-1k", "12 parsecs", "nan", "inf", "1e3", "99999999999TiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	if d, err := ParseDuration("5m"); err != nil || d.Minutes() != 5 {
		t.Errorf("5m: %v %v", d, err)
	}
	if _, err := ParseDuration("5"); err == nil || !strings.Contains(err.Error(), "5m") {
		t.Errorf("5: %v", err)
	}
}

// Sizes and durations come from the command line and config files.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1GiB", "512k", "1e3", "-1", "MiB", "0.5g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Errorf("parseSize(%q) = %d", s, n)
		}
		if err != nil && !strings.Contains(err.Error(), "256MiB") {
			t.Errorf("parseSize(%q): %v does not name the form", s, err)
		}
		if _, err := ParseDuration(s); err != nil && !strings.Contains(err.Error(), "5m") {
			t.Errorf("parseDuration(%q): %v does not name the form", s, err)
		}
	})
}
