package web

// The claim–evidence graph is the claim ledger (internal/claims, as
// `apodex claims` prints it) when the run has claims: K ids with their
// status and load-bearing flag, "cites" edges to their evidence refs,
// "conflicts" edges between disputed claims. A run without claims shows
// where the record cites evidence ids (evidence.Uses); a run that cites
// nothing has an empty graph.

import (
	"slices"

	"github.com/apodex/apodex/internal/claims"
)

// claimGraph is /claims: claims and evidence as nodes, "cites" edges.
type claimGraph struct {
	Nodes []claimNode `json:"nodes"`
	Edges []claimEdge `json:"edges"`
}

type claimNode struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"` // "claim" or "evidence"
	Label       string `json:"label"`
	Agent       string `json:"agent,omitempty"`
	Status      string `json:"status,omitempty"` // a ledger claim's status
	LoadBearing bool   `json:"load_bearing,omitempty"`
	// Settled, Side, Withdrawn and Why as in claims.Claim; Item is the
	// board item it was stated on.
	Settled   bool   `json:"settled,omitempty"`
	Side      string `json:"side,omitempty"`
	Withdrawn string `json:"withdrawn,omitempty"`
	Why       string `json:"why,omitempty"`
	Item      string `json:"item,omitempty"`
}

type claimEdge struct {
	From string `json:"from"` // a claim
	To   string `json:"to"`   // an evidence id
	Kind string `json:"kind"` // "cites" or "conflicts"
}

func loadClaims(l *liveRun) (any, error) {
	g := claimGraph{Nodes: []claimNode{}, Edges: []claimEdge{}}
	if led := l.claimLedger(); len(led.Claims) > 0 {
		return ledgerGraph(led), nil
	}
	items, err := evidenceOf(l)
	if err != nil {
		return g, err
	}
	claims := map[string]bool{}
	for _, it := range items {
		if len(it.CitedIn) == 0 {
			continue
		}
		label := it.Source
		if it.Title != "" {
			label = it.Title
		}
		g.Nodes = append(g.Nodes, claimNode{ID: it.ID, Kind: "evidence", Label: label, Agent: it.Agent})
		for _, u := range it.CitedIn {
			if !claims[u.Where] {
				claims[u.Where] = true
				g.Nodes = append(g.Nodes, claimNode{ID: u.Where, Kind: "claim", Label: u.Where, Agent: u.Agent})
			}
			e := claimEdge{From: u.Where, To: it.ID, Kind: "cites"}
			if !slices.Contains(g.Edges, e) {
				g.Edges = append(g.Edges, e)
			}
		}
	}
	return g, nil
}

// ledgerGraph draws the claim ledger: claims, the refs they cite, and the
// claims they conflict with.
func ledgerGraph(l *claims.Ledger) claimGraph {
	g := claimGraph{Nodes: []claimNode{}, Edges: []claimEdge{}}
	seen := map[string]bool{}
	for _, c := range l.Claims {
		g.Nodes = append(g.Nodes, claimNode{ID: c.ID, Kind: "claim", Label: c.Text, Agent: c.StatedBy, Status: c.Status, LoadBearing: c.LoadBearing,
			Settled: c.Settled, Side: c.Side, Withdrawn: c.Withdrawn, Why: c.Why, Item: c.Item})
		seen[c.ID] = true
	}
	for _, c := range l.Claims {
		for _, ref := range c.Evidence {
			if !seen[ref] {
				seen[ref] = true
				g.Nodes = append(g.Nodes, claimNode{ID: ref, Kind: "evidence", Label: ref})
			}
			g.Edges = append(g.Edges, claimEdge{From: c.ID, To: ref, Kind: "cites"})
		}
		for _, o := range c.ConflictsWith {
			if c.ID < o {
				g.Edges = append(g.Edges, claimEdge{From: c.ID, To: o, Kind: "conflicts"})
			}
		}
	}
	return g
}
