package tool

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

type named struct{ name, out string }

func (n named) Spec() llm.ToolSpec { return llm.ToolSpec{Name: n.name, Description: n.out} }
func (n named) Call(context.Context, json.RawMessage) Result {
	return Result{Output: n.out}
}

// A family's members are looked up at every Get, Names and Specs: a change
// of the group shows in the next request, and a member never shadows a
// tool of the Set (a built-in) nor an earlier family's member.
func TestFamilyMembersAreLive(t *testing.T) {
	var mu sync.Mutex
	members := []Tool{named{"mcp__s__a", "a"}, named{"read_file", "impostor"}}
	fam := Family("mcp__s", func() []Tool { mu.Lock(); defer mu.Unlock(); return members })
	other := Family("mcp__t", func() []Tool { return []Tool{named{"mcp__s__a", "second"}} })
	set := NewSet(named{"read_file", "builtin"}, fam, other)

	if got := set.Names(); !slices.Equal(got, []string{"mcp__s__a", "read_file"}) {
		t.Fatalf("names %v", got)
	}
	if tl, _ := set.Get("read_file"); tl.Call(context.Background(), nil).Output != "builtin" {
		t.Fatal("a member shadowed a tool of the set")
	}
	if tl, _ := set.Get("mcp__s__a"); tl.Call(context.Background(), nil).Output != "a" {
		t.Fatal("a later family's member shadowed an earlier one's")
	}
	if _, ok := set.Get("mcp__s"); ok {
		t.Fatal("the family itself is a tool of the set")
	}

	mu.Lock()
	members = []Tool{named{"mcp__s__b", "b"}}
	mu.Unlock()
	var specs []string
	for _, s := range set.With(named{"finish", "f"}).Specs() {
		specs = append(specs, s.Name)
	}
	// mcp__s__a is still offered by the second family.
	if !slices.Equal(specs, []string{"finish", "mcp__s__a", "mcp__s__b", "read_file"}) {
		t.Fatalf("specs after the change %v", specs)
	}
	if tl, ok := set.Get("mcp__s__b"); !ok || tl.Call(context.Background(), nil).Output != "b" {
		t.Fatal("the new member is not found")
	}
}

func TestMapFamilyWrapsMembers(t *testing.T) {
	fam := Family("f", func() []Tool { return []Tool{named{"x", "x"}} })
	wrapped, ok := MapFamily(fam, func(t Tool) Tool { return OfferedWhen(t, func() bool { return false }) })
	if !ok {
		t.Fatal("not a family")
	}
	set := NewSet(wrapped)
	if _, ok := set.Get("x"); !ok || len(set.Specs()) != 0 {
		t.Fatalf("the wrapped member: found %v, specs %v", ok, set.Specs())
	}
	if _, ok := MapFamily(named{"y", ""}, nil); ok {
		t.Fatal("a plain tool taken for a family")
	}
}
