package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "4GiB": 4 << 30, "16M": 16 << 20, "1000000": 1e6, "10GB": 10e9, "1.5KiB": 1536} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "12 parsecs", "-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestFormatParses(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 1 << 10, 1536, 256 << 20, 4 << 30, 3 << 40, 1<<30 + 1} {
		if got, err := Parse(Format(n)); err != nil || got != n {
			t.Errorf("Parse(Format(%d) = %q) = %d, %v", n, Format(n), got, err)
		}
	}
}
