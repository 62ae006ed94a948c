package netns

import (
	"net/netip"
	"slices"
	"testing"
)

// BlockAlso adds prefixes to the blocked ones until t ends.
func BlockAlso(t testing.TB, p ...netip.Prefix) {
	saved := blockedNets
	blockedNets = append(slices.Clone(saved), p...)
	t.Cleanup(func() { blockedNets = saved })
}

// Blocked are the blocked prefixes now.
func Blocked() []netip.Prefix { return blockedNets }

var Resolvers = resolvers

// Priorities of the rules.
const (
	PrefBlock = prefBlock
	PrefLocal = prefLocal
)
