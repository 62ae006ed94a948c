package publish

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Entry statuses and failure reasons.
const (
	Delivered = "delivered"
	Failed    = "failed"

	ReasonMissing    = "missing"
	ReasonEmpty      = "empty"
	ReasonUnchanged  = "unchanged"   // byte-identical to its baseline: a stale same-name file
	ReasonNotRegular = "not_regular" // a link, directory or special file, or under one
	ReasonHardLink   = "hard_link"
)

// Entry is one declared path at reconciliation (see record.DeliveryEntry).
type Entry = record.DeliveryEntry

// Delivery is the reconciled manifest (R-PUB-4, R-PUB-5), the payload of
// the record's delivery event.
type Delivery = record.Delivery

// Reconcile checks every declared path against the real outputs directory.
// Call it once the agents have stopped (it locks the plane, so it is safe,
// but a write after it is not part of the delivery).
func (p *Plane) Reconcile() Delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := Delivery{Entries: []Entry{}}
	root, err := os.OpenRoot(p.cfg.Outputs)
	if err != nil {
		d.Reason = "cannot open the outputs directory: " + unwrap(err).Error()
		return d
	}
	defer root.Close()
	var failed []string
	for _, pp := range p.paths() {
		m := p.manifest[pp]
		e := entry(root, m)
		if e.Status == Failed {
			failed = append(failed, fmt.Sprintf("%s (%s)", pp, e.Reason))
		}
		d.Entries = append(d.Entries, e)
	}
	fs.WalkDir(root.FS(), ".", func(name string, de fs.DirEntry, err error) error {
		switch {
		case err != nil || name == ".":
			return nil
		case name == "scratch" && de.IsDir():
			return fs.SkipDir
		case !de.IsDir() && p.manifest["/outputs/"+name] == nil:
			d.Undeclared = append(d.Undeclared, "/outputs/"+name)
		}
		return nil
	})
	slices.Sort(d.Undeclared)
	switch {
	case len(d.Entries) == 0:
		d.Reason = "nothing was claimed: no agent declared a path with claim_outputs, so nothing was delivered"
	case len(failed) > 0:
		d.Reason = fmt.Sprintf("%d of %d declared paths not delivered: %s", len(failed), len(d.Entries), strings.Join(failed, ", "))
	default:
		d.OK = true
	}
	return d
}

func entry(root *os.Root, m *Declared) Entry {
	e := Entry{Path: m.Path, Agent: m.Agent, Baseline: m.Baseline, Status: Failed}
	s := look(root, rel(m.Path))
	switch {
	case s.kind == kindAbsent:
		e.Reason, e.Detail = ReasonMissing, m.Path+" does not exist"
		return e
	case s.kind != kindFile || s.parent:
		e.Reason, e.Detail = ReasonNotRegular, fmt.Sprintf("%s %s", s.where, s.what())
		return e
	}
	e.SHA256, e.Bytes = s.hash, s.size
	switch {
	case s.links > 1:
		e.Reason, e.Detail = ReasonHardLink, fmt.Sprintf("%s has %d hard links", m.Path, s.links)
	case s.size == 0:
		e.Reason, e.Detail = ReasonEmpty, m.Path+" is empty"
	case s.hash == m.Baseline:
		e.Reason, e.Detail = ReasonUnchanged, m.Path+" is byte-identical to the file that was there when it was declared"
	default:
		e.Status = Delivered
	}
	return e
}
