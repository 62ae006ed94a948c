package state

import (
	"slices"

	"github.com/apodex/apodex/internal/record"
)

// Control is K, the runtime control state: the publishing lease, the
// manifest and the delivery (the board and the queue come later).
type Control struct {
	LeaseHolder string    `json:"lease_holder,omitempty"` // "" when free
	Manifest    []string  `json:"manifest"`               // every declared path, sorted
	Leases      []Lease   `json:"leases,omitempty"`       // lease events in order
	Delivery    *Delivery `json:"delivery,omitempty"`     // the last delivery event
}

// Lease is one lease event: granted, refused or released.
type Lease struct {
	Seq    int64    `json:"seq"`
	Action string   `json:"action"`
	Agent  string   `json:"agent"`
	Holder string   `json:"holder,omitempty"`
	Paths  []string `json:"paths,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Delivery is the reconciled manifest as the record holds it.
type Delivery = record.Delivery

// DeliveryEntry is one declared path of it.
type DeliveryEntry = record.DeliveryEntry

// Lease actions and the delivered status, as publish writes them.
const (
	leaseGranted  = "granted"
	leaseReleased = "released"
	statusDone    = "delivered"
)

// lease takes a lease event; who asked is the event's agent.
func (s *State) lease(e record.Event, le *record.Lease) {
	l := Lease{Seq: e.Seq, Action: le.Action, Agent: e.Agent, Holder: le.Holder, Paths: le.Paths, Reason: le.Reason}
	switch l.Action {
	case leaseGranted:
		if l.Holder == "" {
			l.Holder = l.Agent
		}
		s.Control.LeaseHolder = l.Holder
		for _, p := range l.Paths {
			if !slices.Contains(s.Control.Manifest, p) {
				s.Control.Manifest = append(s.Control.Manifest, p)
			}
		}
		slices.Sort(s.Control.Manifest)
	case leaseReleased:
		if s.Control.LeaseHolder == l.Agent || s.Control.LeaseHolder == l.Holder {
			s.Control.LeaseHolder = ""
		}
	}
	s.Control.Leases = append(s.Control.Leases, l)
}

// Missing returns the deliverables (nil: the manifest) that are not there:
// once a delivery is recorded, those it did not deliver; before that, those
// with no artifact or an empty one. The order is the deliverables' own.
func (s *State) Missing(deliverables []string) []string {
	if deliverables == nil {
		deliverables = s.Control.Manifest
	}
	var out []string
	for _, d := range deliverables {
		p, ok := planePath(d)
		if !ok {
			out = append(out, d)
			continue
		}
		if !s.present(p) {
			out = append(out, p)
		}
	}
	return out
}

func (s *State) present(p string) bool {
	if d := s.Control.Delivery; d != nil {
		for _, e := range d.Entries {
			if e.Path == p {
				return e.Status == statusDone
			}
		}
		return false
	}
	a, ok := s.Artifacts[p]
	return ok && a.Bytes > 0
}
