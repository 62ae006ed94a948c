package contract

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Judged clause kinds (R-VERIFY-2).
const (
	// KindRubric passes iff an LLM judge scores every dimension at or over
	// its threshold (0–10).
	KindRubric = "rubric"
	// KindHuman is pending until a person approves the run (apodex review).
	KindHuman = "human"
	// SeesDeliverables and SeesTrace are what a rubric's judge reads.
	SeesDeliverables = "deliverables"
	SeesTrace        = "trace"
)

// Dimension is one scored aspect of a rubric.
type Dimension struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Threshold   float64 `json:"threshold"`
}

// rubricClause reads kind: rubric (dimensions, sees, judge_model) or kind:
// human (name only).
func (p *parser) rubricClause(e *yaml.Node, i int, kind string) (Clause, bool) {
	where := fmt.Sprintf("verify[%d]", i)
	allowed := []string{"kind", "name"}
	if kind == KindRubric {
		allowed = append(allowed, "dimensions", "sees", "judge_model")
	}
	m, ok := p.fields(e, where, allowed...)
	if !ok {
		return Clause{}, false
	}
	cl := Clause{Index: i, Line: e.Line, Kind: kind}
	if v := m["name"]; v != nil {
		cl.Name, _ = p.str(v, where+".name")
	}
	if kind == KindHuman {
		return cl, true
	}
	cl.Sees = SeesDeliverables
	if v := m["sees"]; v != nil {
		s, good := p.str(v, where+".sees")
		if good && s != SeesDeliverables && s != SeesTrace {
			p.fail(v, "%s.sees: %q; use deliverables or trace", where, s)
			good = false
		}
		ok = ok && good
		cl.Sees = s
	}
	if v := m["judge_model"]; v != nil {
		cl.JudgeModel, _ = p.str(v, where+".judge_model")
	}
	v := m["dimensions"]
	if v == nil || v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.fail(e, "%s: a rubric needs `dimensions: [{name, description, threshold}]`, each scored 0-10", where)
		return cl, false
	}
	for j, d := range v.Content {
		dw := fmt.Sprintf("%s.dimensions[%d]", where, j)
		dm, good := p.fields(d, dw, "name", "description", "threshold")
		if !good {
			ok = false
			continue
		}
		var dim Dimension
		if n := dm["name"]; n == nil {
			p.fail(d, "%s: name is missing", dw)
			ok = false
		} else {
			dim.Name, _ = p.str(n, dw+".name")
		}
		if n := dm["description"]; n != nil {
			dim.Description, _ = p.str(n, dw+".description")
		}
		if n := dm["threshold"]; n == nil {
			p.fail(d, "%s: threshold is missing; add `threshold: 7` (0-10)", dw)
			ok = false
		} else if t, err := strconv.ParseFloat(n.Value, 64); err != nil || t < 0 || t > 10 {
			p.fail(n, "%s.threshold: %q; give a number from 0 to 10", dw, n.Value)
			ok = false
		} else {
			dim.Threshold = t
		}
		cl.Dimensions = append(cl.Dimensions, dim)
	}
	return cl, ok
}
