package claims

import (
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
)

// weights is what the record says the deliverables rest on: which paths
// are deliverables, who wrote each, and which claims each cites.
type weights struct {
	declared  []string            // the contract's deliverables (latest contract)
	written   []string            // /outputs paths written or leased, in order
	producers map[string][]string // path -> agents that wrote it, in order
	cites     map[string][]string // path -> K ids its latest citations event names
	itemOf    map[string]string   // assignment -> its board item
}

func newWeights() *weights {
	return &weights{producers: map[string][]string{}, cites: map[string][]string{}, itemOf: map[string]string{}}
}

// fold takes what an event (p its decoded payload) says about the
// deliverables.
func (w *weights) fold(e record.Event, p any) {
	switch p := p.(type) {
	case *record.FileDelta:
		if output(p.Path) {
			w.wrote(p.Path, e.Agent)
		}
	case *record.Lease:
		if p.Action == "granted" {
			for _, path := range p.Paths {
				if output(path) && !slices.Contains(w.written, path) {
					w.written = append(w.written, path)
				}
			}
		}
	case *record.Citations:
		w.cites[p.Path] = p.Claims
	case *record.Assignment:
		if p.Item != "" {
			w.itemOf[p.Assignment] = p.Item
		}
	}
}

func (w *weights) wrote(path, agent string) {
	if !slices.Contains(w.written, path) {
		w.written = append(w.written, path)
	}
	if agent != "" && !slices.Contains(w.producers[path], agent) {
		w.producers[path] = append(w.producers[path], agent)
	}
}

// output reports whether p is a path that can be delivered (under /outputs,
// not scratch).
func output(p string) bool {
	return strings.HasPrefix(p, "/outputs/") && !strings.HasPrefix(p, "/outputs/scratch/")
}

// deliverables are the contract's, or without any every /outputs path
// written or leased.
func (w *weights) deliverables() []string {
	if len(w.declared) > 0 {
		return w.declared
	}
	return w.written
}

// weigh decides every claim's load-bearing flag and what it bears:
//
//  1. a deliverable cites it ([K3] in its text, as a citations event read
//     it), or its evidence names a deliverable;
//  2. it was stated on a resolved item that a deliverable's producer
//     depended on: a subagent producer depended on its own item and that
//     item's dependencies (it was given their reports); any other producer
//     (the lead, the writer) — and, while no deliverable is written, the
//     lead's answer — on the board's results, the resolved items no live
//     item depends on; an item whose own claims are all withdrawn or that
//     has none passes this on to its dependencies;
//  3. the lead's mark wins: side is never load-bearing, load_bearing always
//     is; a withdrawn claim never is.
func (w *weights) weigh(l *Ledger, b *board.Board) {
	bears := map[string][]string{} // claim -> reasons
	add := func(id, why string) {
		if !slices.Contains(bears[id], why) {
			bears[id] = append(bears[id], why)
		}
	}
	ds := w.deliverables()
	for _, c := range l.Claims {
		for _, d := range ds {
			if slices.Contains(w.cites[d], c.ID) {
				add(c.ID, "cited by "+d)
			}
		}
		for _, r := range c.Evidence {
			r = strings.TrimSpace(r)
			if slices.Contains(ds, r) || len(w.declared) == 0 && output(r) {
				add(c.ID, "names "+r)
			}
		}
	}
	claimsOn := map[string][]string{} // item -> its live claims
	for _, c := range l.Claims {
		if c.Item != "" && c.Withdrawn == "" {
			claimsOn[c.Item] = append(claimsOn[c.Item], c.ID)
		}
	}
	rests := func(items []string, onto string) {
		for _, it := range w.through(b, items, claimsOn) {
			for _, id := range claimsOn[it] {
				add(id, it+" → "+onto)
			}
		}
	}
	produced := false
	for _, d := range ds {
		for _, p := range w.producers[d] {
			produced = true
			if item, ok := w.itemOf[p]; ok {
				it, err := b.Get(item)
				if err == nil {
					rests(append([]string{item}, it.Deps...), d)
				}
				continue
			}
			rests(results(b), d)
		}
	}
	if !produced {
		rests(results(b), "the answer")
	}
	for i := range l.Claims {
		c := &l.Claims[i]
		switch {
		case c.Withdrawn != "":
		case c.mark == MarkSide:
			c.Side = c.markWhy
			if c.Side == "" {
				c.Side = "marked side by the lead"
			}
		case c.mark == MarkLoadBearing:
			c.LoadBearing, c.Bears = true, append(bears[c.ID], "marked load-bearing by the lead")
		default:
			c.Bears = bears[c.ID]
			c.LoadBearing = len(c.Bears) > 0
		}
	}
}

// through is items that are resolved, with each one that carries no live
// claim replaced by its dependencies (transitively).
func (w *weights) through(b *board.Board, items []string, claimsOn map[string][]string) []string {
	var out []string
	seen := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		it, err := b.Get(id)
		if err != nil || it.State != board.Resolved {
			return
		}
		if len(claimsOn[id]) > 0 {
			out = append(out, id)
			return
		}
		for _, dep := range it.Deps {
			visit(dep)
		}
	}
	for _, id := range items {
		visit(id)
	}
	return out
}

// results are the board's results: resolved items that no item other than
// a cancelled one depends on.
func results(b *board.Board) []string {
	var out []string
	for _, it := range b.Items() {
		if it.State != board.Resolved {
			continue
		}
		live := false
		for _, dep := range b.Dependents(it.ID) {
			if d, err := b.Get(dep); err == nil && d.State != board.Cancelled {
				live = true
				break
			}
		}
		if !live {
			out = append(out, it.ID)
		}
	}
	return out
}
