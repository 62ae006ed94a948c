package transcript

import "slices"

// ByAgent groups a transcript per agent, each in record order: the run's
// own entries before the first agent's come first, the rest last (delivery,
// verification, the end); agents in order of their first entry.
func ByAgent(all []Entry) []Entry {
	runLevel := func(a string) bool { return a == "" || a == "runtime" || a == "user" }
	first := slices.IndexFunc(all, func(x Entry) bool { return !runLevel(x.Agent) })
	if first < 0 {
		return all
	}
	out := append([]Entry(nil), all[:first]...)
	var order []string
	per := map[string][]Entry{}
	var tail []Entry
	for _, x := range all[first:] {
		if runLevel(x.Agent) {
			tail = append(tail, x)
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
