package contract

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxErrors bounds how many problems one parse reports.
const maxErrors = 20

// maxCount bounds every number in a task file (2^53, exact in JSON).
const maxCount = 1 << 53

// parser walks the YAML node tree, collecting every problem with its line.
type parser struct {
	file         string
	base         string
	allowOutside bool // Options.AllowOutside
	errs         []error
}

func (p *parser) fail(n *yaml.Node, format string, a ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	switch {
	case len(p.errs) < maxErrors:
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, a...)})
	case len(p.errs) == maxErrors:
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: "too many problems; fix these first"})
	}
}

// join names a field: join("budget", "turns") is "budget.turns".
func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// describe says what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + "); aliases are not supported, write the value out"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		case "!!int", "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return n.Value
		case "!!null":
			return "nothing"
		}
		return fmt.Sprintf("%s %q", n.Tag, clip(n.Value))
	}
	return "an unexpected value"
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// fields checks that n is a mapping whose keys are all in allowed, each at
// most once, and returns the values by key. ok is false when n is not a
// mapping at all.
func (p *parser) fields(n *yaml.Node, where string, allowed ...string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		name := where
		if name == "" {
			name = "the task file"
		}
		p.fail(n, "%s: want a mapping (key: value lines), got %s", name, describe(n))
		return nil, false
	}
	m := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.fail(k, "%s: a key must be a plain word, got %s", join(where, "?"), describe(k))
			continue
		}
		if !slices.Contains(allowed, k.Value) {
			hint := ""
			if s := closest(k.Value, allowed); s != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", s)
			}
			p.fail(k, "%s: unknown key%s; allowed here: %s", join(where, k.Value), hint, strings.Join(allowed, ", "))
			continue
		}
		if _, dup := m[k.Value]; dup {
			p.fail(k, "%s: given twice; keep one", join(where, k.Value))
			continue
		}
		m[k.Value] = v
	}
	return m, true
}

// str reads a string; empty (after trimming) is refused.
func (p *parser) str(n *yaml.Node, name string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
			hint = " (quote it if it is meant as text)"
		}
		p.fail(n, "%s: want a string, got %s%s", name, describe(n), hint)
		return "", false
	}
	if strings.TrimSpace(n.Value) == "" {
		p.fail(n, "%s: is empty; give a value or remove the key", name)
		return "", false
	}
	return n.Value, true
}

// count reads a non-negative integer.
func (p *parser) count(n *yaml.Node, name string) (int64, bool) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.fail(n, "%s: want a whole number, got %s", name, describe(n))
		return 0, false
	}
	if err := n.Decode(&v); err != nil || v > maxCount {
		p.fail(n, "%s: %s is out of range", name, clip(n.Value))
		return 0, false
	}
	if v < 0 {
		p.fail(n, "%s: must not be negative (got %d); use 0 or leave it out for no limit", name, v)
		return 0, false
	}
	return v, true
}

func (p *parser) boolean(n *yaml.Node, name string) (bool, bool) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&v) != nil {
		p.fail(n, "%s: want true or false, got %s", name, describe(n))
		return false, false
	}
	return v, true
}

// tolerance reads a finite non-negative number.
func (p *parser) tolerance(n *yaml.Node, name string) (float64, bool) {
	var v float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&v) != nil {
		p.fail(n, "%s: want a number like 1e-9, got %s", name, describe(n))
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		p.fail(n, "%s: must be a finite number ≥ 0, got %s", name, clip(n.Value))
		return 0, false
	}
	return v, true
}

// duration reads a Go duration with a unit ("10m", "1h30m", "90s").
func (p *parser) duration(n *yaml.Node, name string) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.fail(n, "%s: want a duration with a unit like 10m, 90s or 1h30m, got %s", name, describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		p.fail(n, "%s: %q is not a duration; write it like 10m, 90s or 1h30m", name, clip(n.Value))
		return 0, false
	}
	if d < 0 {
		p.fail(n, "%s: must not be negative (got %s)", name, n.Value)
		return 0, false
	}
	return d, true
}

// strings reads a non-empty list of non-empty strings without repeats.
func (p *parser) strList(n *yaml.Node, name string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "%s: want a list like [a, b], got %s", name, describe(n))
		return nil, false
	}
	if len(n.Content) == 0 {
		p.fail(n, "%s: is an empty list; list at least one or remove the key", name)
		return nil, false
	}
	var out []string
	ok := true
	for i, e := range n.Content {
		s, good := p.str(e, fmt.Sprintf("%s[%d]", name, i))
		if !good {
			ok = false
			continue
		}
		s = strings.TrimSpace(s)
		if slices.Contains(out, s) {
			p.fail(e, "%s: %q is listed twice", name, s)
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

// closest is the allowed key nearest to k by edit distance, if it is near.
func closest(k string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(k), a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
