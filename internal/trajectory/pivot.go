package trajectory

import (
	"errors"
	"fmt"
)

// Action is one decision of a trajectory: a tool call of its top agent.
type Action struct {
	Step      int    `json:"step"` // 1-based among the top agent's calls
	Seq       int64  `json:"seq"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Pivot is the decision point of a failed run (SPEC R-DATA-3).
type Pivot struct {
	Run string `json:"run"`
	// Found is false when the failed run never parts from a successful
	// sibling (it is a prefix of one: it stopped early).
	Found bool `json:"found"`
	// At is the failed run's decision where it parted; Prefix the shared
	// decisions before it.
	At     *Action  `json:"pivot,omitempty"`
	Prefix []Action `json:"prefix"`
	// Alternatives are what the successful siblings that shared the
	// longest prefix did at that point instead.
	Alternatives []Alternative `json:"alternatives"`
	Successful   []string      `json:"successful_siblings"`
	Ignored      []string      `json:"ignored_siblings,omitempty"` // not successful
}

// Alternative is a successful sibling's action at the pivot.
type Alternative struct {
	Run    string  `json:"run"`
	Action *Action `json:"action"` // nil: the sibling had finished
}

// ErrNoSuccessfulSibling: pivot needs at least one sibling that succeeded.
var ErrNoSuccessfulSibling = errors.New("trajectory: no successful sibling")

// Actions are the top agent's tool calls in order.
func Actions(r *Run) []Action {
	top := ""
	for _, a := range r.Agents {
		if a.Parent == "" {
			top = a.ID
			break
		}
	}
	var out []Action
	for _, c := range r.Calls() {
		if c.Agent == top {
			out = append(out, Action{Step: len(out) + 1, Seq: c.Seq, Name: c.Name, Arguments: c.Arguments})
		}
	}
	return out
}

func same(a, b Action) bool {
	return a.Name == b.Name && NormArgs(a.Arguments) == NormArgs(b.Arguments)
}

// FindPivot localizes the pivot of failed against its siblings: the
// state after k decisions is the sequence of those decisions, so the
// failed run shares a sibling's state while it makes the same calls in
// the same order. The pivot is the earliest decision after which its state
// differs from every successful sibling's: the first decision past the
// longest prefix it shares with any of them. A decision sequence that has
// parted never becomes equal again, so it never rejoins.
func FindPivot(failed *Run, siblings []*Run) (*Pivot, error) {
	p := &Pivot{Run: failed.ID, Prefix: []Action{}, Alternatives: []Alternative{}, Successful: []string{}}
	fa := Actions(failed)
	best := -1
	var bestRuns []*Run
	var bestActs [][]Action
	for _, s := range siblings {
		if !s.Verified && s.Status != "completed" {
			p.Ignored = append(p.Ignored, s.ID)
			continue
		}
		p.Successful = append(p.Successful, s.ID)
		sa := Actions(s)
		n := 0
		for n < len(fa) && n < len(sa) && same(fa[n], sa[n]) {
			n++
		}
		switch {
		case n > best:
			best, bestRuns, bestActs = n, []*Run{s}, [][]Action{sa}
		case n == best:
			bestRuns, bestActs = append(bestRuns, s), append(bestActs, sa)
		}
	}
	if best < 0 {
		return nil, fmt.Errorf("%w among %d: give at least one sibling rollout of the same world that completed", ErrNoSuccessfulSibling, len(siblings))
	}
	p.Prefix = append(p.Prefix, fa[:best]...)
	if best == len(fa) {
		return p, nil
	}
	p.Found = true
	at := fa[best]
	p.At = &at
	for i, s := range bestRuns {
		alt := Alternative{Run: s.ID}
		if best < len(bestActs[i]) {
			a := bestActs[i][best]
			alt.Action = &a
		}
		p.Alternatives = append(p.Alternatives, alt)
	}
	return p, nil
}
