package builtin

import (
	"strconv"
	"testing"
	"unicode/utf8"
)

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func isValid(s string) bool { return utf8.ValidString(s) }
