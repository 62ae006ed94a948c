// Package bytesize reads and prints sizes in bytes as task files write
// them (budget keys mem_limit, tmp_size, workspace_quota): 4GiB, 256MiB,
// 16M, 1000000, 10GB.
//
// Guarantees:
//   - Parse accepts a non-negative number (a fraction too) with an optional
//     unit: K, M, G, T with or without "iB" are powers of 1024, KB, MB, GB,
//     TB powers of 1000, B or nothing bytes, in any case; anything else is
//     an error that shows the form to use;
//   - Format prints n in the largest binary unit that divides it, so that
//     Parse(Format(n)) == n for every n ≥ 0.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a size such as 4GiB, 256MiB, 16M, 1000000 or 10GB (bytes;
// K/M/G/T are powers of 1024 with or without "iB", KB/MB/GB/TB powers of
// 1000).
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, e.g. 256MiB, 4GiB, 1000000", s)
	}
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, t[i:])
	}
	return int64(n * mult), nil
}

// Format prints n bytes the way Parse reads them (4GiB, 256MiB, 1000 bytes
// as "1000").
func Format(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}
