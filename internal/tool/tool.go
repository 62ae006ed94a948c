// Package tool defines what a tool is and the set of tools an agent may
// call: the Tool interface, Result, Set, Define (typed arguments from a Go
// struct) and Family; the built-in tools of SPEC §4 are in tool/builtin.
//
// Guarantees:
//   - a tool never panics the run and never returns a Go error for anything
//     the model did wrong: bad arguments, refused paths, failed commands come
//     back as a Result with IsError set and a message that says how to recover;
//   - Result.Output is what the model reads, already cut to the output limit
//     with the cut stated; Result.Full keeps the whole body for the record;
//   - every file a tool changes is reported as a FileDelta (hash before/after);
//   - a Set offers the model only the tools offered now (OfferedWhen), so a
//     tool of another mode is not in the request.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

// FileDelta is one file changed by a tool call, by plane path. An empty hash
// means the file did not exist. It is workspace.Delta, so that snapshots can
// produce deltas without importing this package.
type FileDelta = workspace.Delta

// Result is the outcome of one tool call.
type Result struct {
	// Output is the text the model reads.
	Output string
	// IsError marks a failed call; the run goes on.
	IsError bool
	// Full is the whole body when Output was cut; nil when Output is whole.
	Full []byte
	// Deltas are the files this call changed.
	Deltas []FileDelta
	// Observed marks Deltas found by comparing snapshots around the call
	// (bash): they may include changes made by calls running alongside it,
	// so exact deltas of other calls take precedence.
	Observed bool
	// Protected asks that the result never be evicted from the context
	// (subagent reports).
	Protected bool
	// Finish is set by the finish tool: the run ends with this summary.
	Finish *Finish
	// Meta is extra detail for the record (exit code, duration, ...).
	Meta *record.ToolMeta
}

// Finish is the finish tool's request to end the run.
type Finish struct {
	Summary string `json:"summary"`
}

// Errorf builds an error Result.
func Errorf(format string, args ...any) Result {
	return Result{Output: "error: " + fmt.Sprintf(format, args...), IsError: true}
}

// Tool is one callable tool.
type Tool interface {
	Spec() llm.ToolSpec
	// Call runs the tool. args is the raw JSON the model sent.
	Call(ctx context.Context, args json.RawMessage) Result
}

// Serial marks a tool whose calls are barriers within a turn: a serial call
// starts after every earlier call of the turn ended, and later calls start
// after it (board mutations, dispatch, leases), so effects follow call order.
func Serial(t Tool) Tool { return serial{t} }

type serial struct{ Tool }

func (serial) Serial() bool { return true }

// Offered forwards to the wrapped tool: a serial tool is offered when it is.
func (s serial) Offered() bool { return IsOffered(s.Tool) }

// OfferedWhen makes t offered to the model only while cond holds (a tool of
// one mode: finish_planning while planning, writes after it). A call made
// anyway still reaches t, which refuses it with the reason.
func OfferedWhen(t Tool, cond func() bool) Tool { return offered{t, cond} }

type offered struct {
	Tool
	cond func() bool
}

func (o offered) Offered() bool { return o.cond() && IsOffered(o.Tool) }

func (o offered) Serial() bool { return IsSerial(o.Tool) }

// IsOffered reports whether t is offered to the model now (true unless it
// was wrapped with OfferedWhen and its condition does not hold).
func IsOffered(t Tool) bool {
	o, ok := t.(interface{ Offered() bool })
	return !ok || o.Offered()
}

// IsSerial reports whether t was marked with Serial.
func IsSerial(t Tool) bool {
	s, ok := t.(interface{ Serial() bool })
	return ok && s.Serial()
}

// Set is the tools one agent may call, by name, and the families whose
// members it looks up when asked (see Family).
type Set struct {
	tools    map[string]Tool
	families []*family
}

// NewSet builds a Set; a later tool of the same name replaces an earlier one.
func NewSet(tools ...Tool) *Set {
	s := &Set{tools: make(map[string]Tool)}
	s.add(tools)
	return s
}

func (s *Set) add(tools []Tool) {
	for _, t := range tools {
		if f, ok := t.(*family); ok {
			s.families = append(s.families, f)
			continue
		}
		s.tools[t.Spec().Name] = t
	}
}

// With returns a new Set with more tools (replacing same-named ones).
func (s *Set) With(tools ...Tool) *Set {
	n := &Set{tools: make(map[string]Tool, len(s.tools)+len(tools)), families: append([]*family(nil), s.families...)}
	for k, t := range s.tools {
		n.tools[k] = t
	}
	n.add(tools)
	return n
}

// Get returns the named tool.
func (s *Set) Get(name string) (Tool, bool) {
	if t, ok := s.tools[name]; ok {
		return t, ok
	}
	t, ok := s.members()[name]
	return t, ok
}

// Names lists tool names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.tools))
	for n := range s.tools {
		names = append(names, n)
	}
	for n := range s.members() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Specs lists the specs of the tools offered now, in name order, for the
// model request.
func (s *Set) Specs() []llm.ToolSpec {
	members := s.members()
	names := make([]string, 0, len(s.tools)+len(members))
	for n := range s.tools {
		names = append(names, n)
	}
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	specs := make([]llm.ToolSpec, 0, len(names))
	for _, n := range names {
		t, ok := s.tools[n]
		if !ok {
			t = members[n]
		}
		if IsOffered(t) {
			specs = append(specs, t.Spec())
		}
	}
	return specs
}

type callIDKey struct{}

// WithCallID tells a tool which call it is serving, so effects it records
// (board mutations, dispatches) can name the call that caused them.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallID is the id of the call a tool is serving, or "".
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}
