package web

// The claim ledger (apodex claims) is built elsewhere; until it lands, the
// claim–evidence graph is read from where the record shows evidence ids
// cited (evidence.Uses). A run that cites nothing has an empty graph.

import (
	"slices"
)

// claimGraph is /claims: claims and evidence as nodes, "cites" edges.
type claimGraph struct {
	Nodes []claimNode `json:"nodes"`
	Edges []claimEdge `json:"edges"`
}

type claimNode struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"` // "claim" or "evidence"
	Label string `json:"label"`
	Agent string `json:"agent,omitempty"`
}

type claimEdge struct {
	From string `json:"from"` // a claim
	To   string `json:"to"`   // an evidence id
	Kind string `json:"kind"` // "cites"
}

func loadClaims(dir string) (claimGraph, error) {
	g := claimGraph{Nodes: []claimNode{}, Edges: []claimEdge{}}
	items, err := loadEvidence(dir)
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
