package record

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ErrUnknownType: an event type this version does not know (a record
// written by a newer version).
var ErrUnknownType = errors.New("record: unknown event type")

var (
	catMu     sync.RWMutex
	catalogue = map[string]func() any{
		TypeRunStarted:    func() any { return new(RunStarted) },
		TypeModelRequest:  func() any { return new(ModelRequest) },
		TypeModelResponse: func() any { return new(ModelResponse) },
		TypeModelRetry:    func() any { return new(ModelRetry) },
		TypeModelError:    func() any { return new(ModelError) },
		TypeToolCall:      func() any { return new(ToolCall) },
		TypeToolResult:    func() any { return new(ToolResult) },
		TypeFileDelta:     func() any { return new(FileDelta) },
		TypeObservation:   func() any { return new(Observation) },
		TypeWarning:       func() any { return new(Warning) },
		TypeCompaction:    func() any { return new(Compaction) },
		TypePartialResult: func() any { return new(PartialResult) },
		TypeRunFinished:   func() any { return new(RunFinished) },
		TypeContract:      func() any { return new(Contract) },
		TypeLease:         func() any { return new(Lease) },
		TypeDelivery:      func() any { return new(Delivery) },
		TypeVerification:  func() any { return new(Verification) },
		TypeMessage:       func() any { return new(Message) },
		TypeControl:       func() any { return new(Control) },
		TypeResumed:       func() any { return new(Resumed) },
		TypePrecheck:      func() any { return new(Precheck) },
		TypeBoard:         func() any { return new(Board) },
		TypeAssignment:    func() any { return new(Assignment) },
		TypeReport:        func() any { return new(Report) },
		TypePlanning:      func() any { return new(Planning) },
		TypeVerdict:       func() any { return new(Verdict) },
		TypeMerge:         func() any { return new(Merge) },
		TypeAgentStarted:  func() any { return new(AgentStarted) },
	}
)

// Register adds an event type to the catalogue: newPayload returns a
// pointer to a fresh payload struct. Files events_<domain>.go call it from
// init for the types of their domain. Registering a type twice panics.
func Register(typ string, newPayload func() any) {
	catMu.Lock()
	defer catMu.Unlock()
	if _, dup := catalogue[typ]; dup {
		panic("record: event type registered twice: " + typ)
	}
	catalogue[typ] = newPayload
}

// Types lists every event type this version knows, sorted.
func Types() []string {
	catMu.RLock()
	defer catMu.RUnlock()
	return slices.Sorted(maps.Keys(catalogue))
}

// Known reports whether typ is in the catalogue.
func Known(typ string) bool {
	catMu.RLock()
	defer catMu.RUnlock()
	_, ok := catalogue[typ]
	return ok
}

// DecodePayload returns the event's payload as a pointer to its typed struct
// (*RunStarted for run_started, ...). An event type not in the catalogue is
// an error wrapping ErrUnknownType; a payload that does not decode is an
// error naming the seq.
func DecodePayload(e Event) (any, error) {
	catMu.RLock()
	newPayload, ok := catalogue[e.Type]
	catMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q at seq %d (written by a newer apodex?)", ErrUnknownType, e.Type, e.Seq)
	}
	p := newPayload()
	if err := e.Decode(p); err != nil {
		return nil, err
	}
	return p, nil
}

// As is e's payload when e is an event of T's type (T is the payload
// struct: As[RunFinished]); ok is false for another type and for a payload
// that does not decode. It spares a caller comparing type strings.
func As[T any](e Event) (p *T, ok bool) {
	v, err := DecodePayload(e)
	p, ok = v.(*T)
	return p, ok && err == nil
}
