package publish

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestManifestCap tries to get past the manifest cap in one claim and in
// several, with the default cap and a configured one (the contract's).
func TestManifestCap(t *testing.T) {
	paths := func(from, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("/outputs/f%d.txt", from+i)
		}
		return out
	}
	f := newFixture(t, 0, nil)
	_, err := f.plane.Claim("main", paths(0, 30000)) // W7: 30,000 took 53 s a turn
	if !errors.Is(err, ErrInvalidClaim) || !strings.Contains(err.Error(), "30000 paths, more than the manifest cap of 1000") || !strings.Contains(err.Error(), "limits: {deliverables: N}") {
		t.Fatalf("30,000 paths: %v", err)
	}
	if len(f.events) != 1 || len(f.events[0].Paths) != MaxPaths {
		t.Fatalf("the refusal recorded %d paths", len(f.events[0].Paths))
	}
	if _, err := f.plane.Claim("main", paths(0, MaxPaths)); err != nil {
		t.Fatalf("a claim at the cap: %v", err)
	}
	if _, err := f.plane.Claim("main", paths(MaxPaths, 1)); err == nil || !strings.Contains(err.Error(), "would have 1001 paths, more than the manifest cap of 1000") {
		t.Fatalf("one past the cap in a second claim: %v", err)
	}

	g := newFixture(t, 0, nil)
	g.plane.cfg.MaxPaths = 3
	if _, err := g.plane.Claim("main", paths(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.plane.Claim("main", paths(2, 2)); err == nil || !strings.Contains(err.Error(), "more than the manifest cap of 3") {
		t.Fatalf("configured cap: %v", err)
	}
	if h, held := g.plane.Holder(); h != "main" || len(held) != 2 {
		t.Fatalf("a refused claim changed the manifest: %s %v", h, held)
	}
}

// BenchmarkClaimAtCap measures one claim of a manifest at the default cap
// (1,000 paths) and the refusal of 30,000 (W7).
//
//	go test -run XXX -bench ClaimAtCap ./internal/publish/
func BenchmarkClaimAtCap(b *testing.B) {
	paths := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("/outputs/f%d.txt", i)
		}
		return out
	}
	b.Run("1000", func(b *testing.B) {
		ps := paths(MaxPaths)
		for b.Loop() {
			b.StopTimer()
			f := newFixture(b, 0, nil)
			b.StartTimer()
			if _, err := f.plane.Claim("main", ps); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("30000 refused", func(b *testing.B) {
		ps := paths(30000)
		f := newFixture(b, 0, nil) // a refusal changes nothing
		for b.Loop() {
			if _, err := f.plane.Claim("main", ps); err == nil {
				b.Fatal("claimed")
			}
		}
	})
}
