package state

import (
	"strings"
)

// Node kinds.
const (
	KindFile     = "file"     // a file version, id path@hash
	KindAction   = "action"   // a tool call that wrote files, id tool#seq
	KindEvidence = "evidence" // a retrieval result, id E1, E2, …
)

// Edge kinds; see the package doc for the rules.
const (
	EdgeInput   = "input"   // file -> action: the action used the file
	EdgeContext = "context" // evidence -> action: the agent had read it
	EdgeRead    = "read"    // file -> evidence: the evidence came from the file
	EdgeWrote   = "wrote"   // action -> file: the action produced the version
)

// Graph is G: nodes and edges in the order they appeared.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`

	index map[string]int // node id -> position in Nodes
	into  map[string][]int
	edges map[Edge]bool
}

// Node is a file version, an action or an evidence item.
type Node struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Path  string `json:"path,omitempty"`
	Hash  string `json:"hash,omitempty"`
	Tool  string `json:"tool,omitempty"`
	Seq   int64  `json:"seq,omitempty"`
	Agent string `json:"agent,omitempty"`
}

// Edge is one dependency; Seq is the event that established it.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
	Seq  int64  `json:"seq"`
}

func newGraph() Graph {
	return Graph{Nodes: []Node{}, Edges: []Edge{}, index: map[string]int{}, into: map[string][]int{}, edges: map[Edge]bool{}}
}

func (g *Graph) node(n Node) {
	if _, ok := g.index[n.ID]; !ok {
		g.index[n.ID] = len(g.Nodes)
		g.Nodes = append(g.Nodes, n)
	}
}

// fileNode adds the node of a file version and returns its id.
func (g *Graph) fileNode(path, hash string) string {
	id := fileID(path, hash)
	g.node(Node{ID: id, Kind: KindFile, Path: path, Hash: hash})
	return id
}

func fileID(path, hash string) string {
	if hash == "" {
		return path
	}
	return path + "@" + hash
}

// edge adds e unless an edge of the same kind already joins the same nodes.
func (g *Graph) edge(e Edge) {
	key := Edge{From: e.From, To: e.To, Kind: e.Kind}
	if g.edges[key] {
		return
	}
	g.edges[key] = true
	g.into[e.To] = append(g.into[e.To], len(g.Edges))
	g.Edges = append(g.Edges, e)
}

// Node returns the node with id.
func (g *Graph) Node(id string) (Node, bool) {
	i, ok := g.index[id]
	if !ok {
		return Node{}, false
	}
	return g.Nodes[i], true
}

// Into returns the edges of kind that end at id, in order.
func (g *Graph) Into(id, kind string) []Edge {
	var out []Edge
	for _, i := range g.into[id] {
		if g.Edges[i].Kind == kind {
			out = append(out, g.Edges[i])
		}
	}
	return out
}

// Walk limits.
const (
	maxDepth  = 16 // actions along one chain
	maxChains = 64
)

// Hop is one step of a chain.
type Hop struct {
	Kind    string `json:"kind"`  // KindFile, KindAction or KindEvidence
	ID      string `json:"id"`    // graph node id
	Label   string `json:"label"` // path, tool#seq or E<n>
	Hash    string `json:"hash,omitempty"`
	Context bool   `json:"context,omitempty"` // reached by a context edge
}

// Chain is one line of provenance, from the artifact back to a source.
type Chain struct {
	Hops []Hop `json:"hops"`
	// Cut: the walk stopped here (depth limit or a node already on the chain).
	Cut bool `json:"cut,omitempty"`
}

// String renders the chain, e.g. "/outputs/sum.txt ← bash#7 ← /inputs/data.csv".
func (c Chain) String() string {
	parts := make([]string, len(c.Hops))
	for i, h := range c.Hops {
		parts[i] = h.label()
	}
	s := strings.Join(parts, " ← ")
	if c.Cut {
		s += " ← …"
	}
	return s
}

func (h Hop) label() string {
	if h.Context {
		return "[context] " + h.Label
	}
	return h.Label
}

// Provenance walks back from the artifact at path through the actions that
// produced it and their sources, one chain per source reached. It is nil
// for a path with no artifact.
func (s *State) Provenance(path string) []Chain {
	p, ok := planePath(path)
	if !ok {
		return nil
	}
	a, ok := s.Artifacts[p]
	if !ok {
		return nil
	}
	w := walker{g: &s.Graph, on: map[string]bool{}}
	file := Hop{Kind: KindFile, ID: fileID(p, a.Hash), Label: p, Hash: a.Hash}
	w.action(a.Action, []Hop{file}, 0)
	return w.out
}

type walker struct {
	g   *Graph
	on  map[string]bool // nodes on the current chain
	out []Chain
}

func (w *walker) emit(hops []Hop, cut bool) {
	if len(w.out) < maxChains {
		w.out = append(w.out, Chain{Hops: append([]Hop(nil), hops...), Cut: cut})
	}
}

// file continues a chain at a file version: through the action that first
// produced that version, if any.
func (w *walker) file(id string, hops []Hop, depth int) {
	n, _ := w.g.Node(id)
	hops = append(hops, Hop{Kind: KindFile, ID: id, Label: n.Path, Hash: n.Hash})
	wrote := w.g.Into(id, EdgeWrote)
	if len(wrote) == 0 {
		w.emit(hops, false)
		return
	}
	w.action(wrote[0].From, hops, depth)
}

// action continues a chain at an action: its inputs, or else its context.
func (w *walker) action(id string, hops []Hop, depth int) {
	if len(w.out) >= maxChains {
		return
	}
	hops = append(hops, Hop{Kind: KindAction, ID: id, Label: id})
	if w.on[id] || depth >= maxDepth {
		w.emit(hops, true)
		return
	}
	w.on[id] = true
	defer delete(w.on, id)
	if in := w.g.Into(id, EdgeInput); len(in) > 0 {
		for _, e := range in {
			w.file(e.From, hops, depth+1)
		}
		return
	}
	ctx := w.g.Into(id, EdgeContext)
	if len(ctx) == 0 {
		w.emit(hops, false)
		return
	}
	for _, e := range ctx {
		ev := append(hops, Hop{Kind: KindEvidence, ID: e.From, Label: e.From, Context: true})
		read := w.g.Into(e.From, EdgeRead)
		if len(read) == 0 {
			w.emit(ev, false)
		}
		for _, r := range read {
			w.file(r.From, ev, depth+1)
		}
	}
}
