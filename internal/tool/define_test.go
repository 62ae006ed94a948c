package tool

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// expect checks that the output contains every fragment, and the error flag.
func expect(t *testing.T, r Result, isErr bool, frags ...string) {
	t.Helper()
	if r.IsError != isErr {
		t.Fatalf("IsError=%v, want %v; output:\n%s", r.IsError, isErr, r.Output)
	}
	for _, f := range frags {
		if !strings.Contains(r.Output, f) {
			t.Fatalf("output does not contain %q:\n%s", f, r.Output)
		}
	}
}

func TestCut(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 5<<20/17) // about 5 MB of lines
	r := Cut(Result{Output: big}, DefaultObservationLimit)
	if string(r.Full) != big {
		t.Fatal("Full is not the whole output")
	}
	if len(r.Output) > DefaultObservationLimit+200 {
		t.Fatalf("output is %d bytes", len(r.Output))
	}
	if !strings.Contains(r.Output, "bytes cut of "+itoa(len(big))+" total; the full output is in the run record") {
		t.Fatalf("cut not stated:\n%s", r.Output[9000:11000])
	}
	if !strings.HasPrefix(r.Output, "0123456789abcdef\n") || !strings.HasSuffix(r.Output, "0123456789abcdef\n") {
		t.Fatal("head or tail lost")
	}
	// the stated count adds up
	head, rest, _ := strings.Cut(r.Output, "[... ")
	n, _, _ := strings.Cut(rest, " bytes")
	_, tail, _ := strings.Cut(rest, "...]\n")
	if len(head)+atoi(t, n)+len(tail) != len(big) {
		t.Fatalf("head %d + cut %s + tail %d != %d", len(head), n, len(tail), len(big))
	}
	small := Result{Output: "short"}
	if got := Cut(small, 100); got.Output != "short" || got.Full != nil {
		t.Fatalf("short output changed: %+v", got)
	}
	// multi-byte text is cut on rune boundaries
	u := Cut(Result{Output: strings.Repeat("é", 50000)}, 1000)
	if !strings.HasPrefix(u.Output, "éé") || strings.ContainsRune(u.Output, '\uFFFD') || !isValid(u.Output) {
		t.Fatal("cut split a rune")
	}
}

func TestDefineRecoversPanic(t *testing.T) {
	tl := Define("boom", "panics", 0, func(context.Context, struct {
		X string `json:"x,omitempty" desc:"x"`
	}) Result {
		panic("kaboom")
	})
	r := tl.Call(context.Background(), json.RawMessage(`{}`))
	expect(t, r, true, "kaboom", "bug")
}

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
