package state

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Format renders the chains of one artifact on one line, sharing their
// common start: sources of one action are joined with ", ", and a source
// with its own history is put in parentheses, e.g.
// "/outputs/r.txt ← bash#9 ← (/workspace/a ← bash#3 ← /inputs/x), /inputs/y".
func Format(chains []Chain) string {
	var root *trie
	for _, c := range chains {
		if len(c.Hops) == 0 {
			continue
		}
		if root == nil {
			root = &trie{hop: c.Hops[0]}
		}
		n := root
		for _, h := range c.Hops[1:] {
			n = n.child(h)
		}
		n.cut = n.cut || c.Cut
	}
	if root == nil {
		return ""
	}
	return root.String()
}

type trie struct {
	hop  Hop
	cut  bool
	kids []*trie
}

func (t *trie) child(h Hop) *trie {
	for _, k := range t.kids {
		if k.hop.ID == h.ID && k.hop.Context == h.Context {
			return k
		}
	}
	k := &trie{hop: h}
	t.kids = append(t.kids, k)
	return k
}

func (t *trie) String() string {
	s := t.hop.label()
	switch {
	case t.cut && len(t.kids) == 0:
		return s + " ← …"
	case len(t.kids) == 1:
		return s + " ← " + t.kids[0].String()
	case len(t.kids) > 1:
		parts := make([]string, len(t.kids))
		for i, k := range t.kids {
			parts[i] = k.String()
			if len(k.kids) > 0 || k.cut {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		return s + " ← " + strings.Join(parts, ", ")
	}
	return s
}

// RenderArtifacts writes one line per artifact, sorted by path: size, hash
// prefix, producing agent and provenance.
func (s *State) RenderArtifacts(w io.Writer) error {
	paths := make([]string, 0, len(s.Artifacts))
	for p := range s.Artifacts {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		a := s.Artifacts[p]
		line := Format(s.Provenance(p))
		if line == "" {
			line = p
		}
		producer := a.Producer
		if producer == "" {
			producer = "-"
		}
		if _, err := fmt.Fprintf(w, "%9s  %-12s  %-8s  %s\n", size(a.Bytes), shortHash(a.Hash), producer, line); err != nil {
			return err
		}
	}
	return nil
}

// Counts sums up a state.
type Counts struct {
	Files          int `json:"files"`
	Inputs         int `json:"inputs"`
	Evidence       int `json:"evidence"`
	Commands       int `json:"commands"`
	FailedCommands int `json:"failed_commands"` // nonzero exit, timeout, not run or no result
	Artifacts      int `json:"artifacts"`
	Outputs        int `json:"outputs"` // artifacts under /outputs, scratch included
	Nodes          int `json:"nodes"`
	Edges          int `json:"edges"`
}

// Summary counts the parts of the state.
func (s *State) Summary() Counts {
	c := Counts{Files: len(s.Files), Evidence: len(s.Evidence), Commands: len(s.Commands), Artifacts: len(s.Artifacts),
		Nodes: len(s.Graph.Nodes), Edges: len(s.Graph.Edges)}
	for p := range s.Files {
		if under(p, "/inputs") {
			c.Inputs++
		}
	}
	for _, cmd := range s.Commands {
		if !cmd.Done || cmd.ExitCode != 0 || cmd.TimedOut || cmd.Error != "" {
			c.FailedCommands++
		}
	}
	for p := range s.Artifacts {
		if under(p, "/outputs") {
			c.Outputs++
		}
	}
	return c
}

func (c Counts) String() string {
	return fmt.Sprintf("%d files (%d inputs), %d evidence, %d commands (%d failed), %d artifacts (%d under /outputs), graph %d nodes %d edges",
		c.Files, c.Inputs, c.Evidence, c.Commands, c.FailedCommands, c.Artifacts, c.Outputs, c.Nodes, c.Edges)
}

func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	return h[:min(len(h), 12)]
}

func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
