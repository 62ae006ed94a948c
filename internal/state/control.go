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

// Delivery mirrors publish.Delivery (same JSON), so that reading a record
// does not need the publication plane.
type Delivery struct {
	Entries    []DeliveryEntry `json:"entries"`
	Undeclared []string        `json:"undeclared,omitempty"`
	OK         bool            `json:"ok"`
	Reason     string          `json:"reason,omitempty"`
}

// DeliveryEntry mirrors publish.Entry.
type DeliveryEntry struct {
	Path     string `json:"path"`
	Agent    string `json:"agent"`
	Baseline string `json:"baseline"`
	SHA256   string `json:"sha256,omitempty"`
	Bytes    int64  `json:"bytes"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Lease actions and the delivered status, as publish writes them.
const (
	leaseGranted  = "granted"
	leaseReleased = "released"
	statusDone    = "delivered"
)

func (s *State) lease(e record.Event) error {
	// The payload is publish.LeaseEvent; its "agent" (who asked) is the
	// envelope's agent when the two share the field name.
	var le struct {
		Action string   `json:"action"`
		Agent  string   `json:"agent"`
		Holder string   `json:"holder"`
		Paths  []string `json:"paths"`
		Reason string   `json:"reason"`
	}
	if err := e.Decode(&le); err != nil {
		return err
	}
	l := Lease{Seq: e.Seq, Action: le.Action, Agent: le.Agent, Holder: le.Holder, Paths: le.Paths, Reason: le.Reason}
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
	return nil
}

func (s *State) delivery(e record.Event) error {
	var d Delivery
	if err := e.Decode(&d); err != nil {
		return err
	}
	s.Control.Delivery = &d
	return nil
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
