package eval

import (
	"math"
)

// Report is `apodex eval show`: per configuration, in suite order.
type Report struct {
	ID      string         `json:"id"`
	Suite   string         `json:"suite"`
	Done    int            `json:"done"`
	Total   int            `json:"total"`
	Configs []ConfigReport `json:"configs"`
}

// ConfigReport summarizes one configuration's rollouts.
type ConfigReport struct {
	Name     string  `json:"name"`
	Mode     string  `json:"mode"`
	Rollouts int     `json:"rollouts"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
	// Interval is the 95% Wilson score interval of the pass rate.
	Interval [2]float64 `json:"interval_95"`
	// Mean is the mean score vector; a share no rollout had is null.
	Mean MeanVector `json:"mean"`
	// Lift is the pass rate minus the first configuration's (0 for the
	// first); ComputeRatio is mean tokens over the first's mean tokens.
	Lift         float64  `json:"lift"`
	ComputeRatio *float64 `json:"compute_ratio"`
}

// MeanVector is the mean of the score vectors.
type MeanVector struct {
	Correct      float64  `json:"correct"`
	Completeness *float64 `json:"completeness"`
	Provenance   *float64 `json:"provenance"`
	Recovery     *float64 `json:"recovery"`
	Intervention *float64 `json:"intervention"`
	WallS        float64  `json:"wall_s"`
	Tokens       float64  `json:"tokens"`
	ToolCalls    float64  `json:"tool_calls"`
}

// Summarize builds the report of a plan's results.
func Summarize(p *Plan, results []Result) Report {
	rep := Report{ID: p.ID, Suite: p.Suite, Done: len(results), Total: p.Total()}
	for _, c := range p.Configs {
		var rs []Result
		for _, r := range results {
			if r.Config == c.Name {
				rs = append(rs, r)
			}
		}
		cr := ConfigReport{Name: c.Name, Mode: c.Mode, Rollouts: len(rs)}
		if cr.Mode == "" {
			cr.Mode = "react"
		}
		for _, r := range rs {
			if r.Correct == 1 {
				cr.Passed++
			}
		}
		if cr.Rollouts > 0 {
			cr.PassRate = float64(cr.Passed) / float64(cr.Rollouts)
		}
		lo, hi := Wilson(cr.Passed, cr.Rollouts)
		cr.Interval = [2]float64{lo, hi}
		cr.Mean = mean(rs)
		rep.Configs = append(rep.Configs, cr)
	}
	if len(rep.Configs) > 0 {
		first := rep.Configs[0]
		for i := range rep.Configs {
			c := &rep.Configs[i]
			c.Lift = c.PassRate - first.PassRate
			if first.Mean.Tokens > 0 {
				r := c.Mean.Tokens / first.Mean.Tokens
				c.ComputeRatio = &r
			}
		}
	}
	return rep
}

// Wilson is the 95% Wilson score interval for k successes in n trials;
// [0, 1] when n is 0.
func Wilson(k, n int) (float64, float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	p, nn := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nn
	center := (p + z*z/(2*nn)) / den
	half := z * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn)) / den
	return math.Max(0, center-half), math.Min(1, center+half)
}

func mean(rs []Result) MeanVector {
	var m MeanVector
	if len(rs) == 0 {
		return m
	}
	n := float64(len(rs))
	var comp, prov, rec, iv []float64
	for _, r := range rs {
		m.Correct += r.Correct / n
		m.WallS += r.WallS / n
		m.Tokens += float64(r.Tokens) / n
		m.ToolCalls += float64(r.ToolCalls) / n
		for _, x := range []struct {
			v   *float64
			acc *[]float64
		}{{r.Completeness, &comp}, {r.Provenance, &prov}, {r.Recovery, &rec}, {r.Intervention, &iv}} {
			if x.v != nil {
				*x.acc = append(*x.acc, *x.v)
			}
		}
	}
	m.Completeness, m.Provenance, m.Recovery, m.Intervention = avg(comp), avg(prov), avg(rec), avg(iv)
	return m
}

func avg(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	s /= float64(len(xs))
	return &s
}
