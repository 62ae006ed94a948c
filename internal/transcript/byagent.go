package transcript

import "slices"

// ByAgent groups a transcript per agent, each in record order: the run's
// own entries before the first agent's come first, the rest last (delivery,
// verification, the end); agents in order of their first entry. A resume
// is a note in place in the section of every agent that was under way
// across it (with entries before and after it), so it reads where the
// stop fell; a resume no agent spans stays among the run's own entries.
func ByAgent(all []Entry) []Entry {
	runLevel := func(a string) bool { return a == "" || a == "runtime" || a == "user" }
	first := slices.IndexFunc(all, func(x Entry) bool { return !runLevel(x.Agent) })
	if first < 0 {
		return all
	}
	from, to := map[string]int64{}, map[string]int64{} // each agent's first and last seq
	for _, x := range all {
		if runLevel(x.Agent) {
			continue
		}
		if _, ok := from[x.Agent]; !ok {
			from[x.Agent] = x.Seq
		}
		to[x.Agent] = x.Seq
	}
	out := append([]Entry(nil), all[:first]...)
	var order []string
	per := map[string][]Entry{}
	var tail []Entry
	for _, x := range all[first:] {
		if runLevel(x.Agent) {
			placed := false
			if x.Kind == KindResumed {
				for _, a := range order {
					if from[a] < x.Seq && x.Seq < to[a] {
						y := x
						y.Agent = a // a note in a's section
						per[a] = append(per[a], y)
						placed = true
					}
				}
			}
			if !placed {
				tail = append(tail, x)
			}
			continue
		}
		if _, ok := per[x.Agent]; !ok {
			order = append(order, x.Agent)
		}
		per[x.Agent] = append(per[x.Agent], x)
	}
	for _, a := range order {
		out = append(out, per[a]...)
	}
	return append(out, tail...)
}

// Agents are the agents of a transcript, in order of their first entry.
func Agents(all []Entry) []string {
	var out []string
	for _, x := range all {
		if x.Agent != "" && x.Agent != "runtime" && x.Agent != "user" && !slices.Contains(out, x.Agent) {
			out = append(out, x.Agent)
		}
	}
	return out
}

// Unanswered adds, right after each tool call that has neither a result
// nor an interrupted entry after it, an entry of kind (KindInterrupted, or
// KindRunning for a live run's call) saying note. Calls and results are
// paired per agent and call id in record order, so an id a model reused
// pairs with the result that follows it.
func Unanswered(all []Entry, kind, note string) []Entry {
	type key struct{ agent, id string }
	pending := map[key][]int{}
	open := map[int]bool{}
	for i, x := range all {
		k := key{x.Agent, x.CallID}
		switch x.Kind {
		case KindToolCall:
			pending[k] = append(pending[k], i)
			open[i] = true
		case KindToolResult, KindInterrupted:
			if p := pending[k]; len(p) > 0 {
				delete(open, p[0])
				pending[k] = p[1:]
			}
		}
	}
	out := make([]Entry, 0, len(all)+len(open))
	for i, x := range all {
		out = append(out, x)
		if open[i] {
			y := x
			y.Kind, y.Args, y.Output, y.Error = kind, "", note, kind == KindInterrupted
			out = append(out, y)
		}
	}
	return out
}
