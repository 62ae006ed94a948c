package tool

import (
	"context"
	"encoding/json"

	"github.com/apodex/apodex/internal/llm"
)

// Family stands for a group of tools whose members may change while an
// agent runs: an MCP server's tools, after the server says its list
// changed. A Set holding a family looks its members up at every Get, Names
// and Specs, so a change shows in the agent's next request. A member never
// replaces a tool of the Set itself, nor a member of an earlier family of
// the same name: built-ins are never shadowed.
//
// name identifies the family in the Set (it is not a tool the model sees);
// members must be cheap and safe to call from several goroutines.
func Family(name string, members func() []Tool) Tool {
	return &family{name: name, members: members}
}

type family struct {
	name    string
	members func() []Tool
}

func (f *family) Spec() llm.ToolSpec { return llm.ToolSpec{Name: f.name} }

// Call is never reached through a Set, which offers only the members.
func (f *family) Call(context.Context, json.RawMessage) Result {
	return Errorf("%s is a group of tools, not a tool: call one of its members", f.name)
}

// MapFamily returns a family whose members are wrap of t's members, and
// true, when t is a family; t and false otherwise. A guard that wraps each
// tool of an agent (planning mode) wraps a family's members through it.
func MapFamily(t Tool, wrap func(Tool) Tool) (Tool, bool) {
	f, ok := t.(*family)
	if !ok {
		return t, false
	}
	return &family{name: f.name, members: func() []Tool {
		ms := f.members()
		out := make([]Tool, len(ms))
		for i, m := range ms {
			out[i] = wrap(m)
		}
		return out
	}}, true
}

// members lists the members of s's families a static tool or an earlier
// member does not shadow, by name.
func (s *Set) members() map[string]Tool {
	if len(s.families) == 0 {
		return nil
	}
	out := map[string]Tool{}
	for _, f := range s.families {
		for _, m := range f.members() {
			n := m.Spec().Name
			if _, static := s.tools[n]; static {
				continue
			}
			if _, dup := out[n]; !dup {
				out[n] = m
			}
		}
	}
	return out
}
