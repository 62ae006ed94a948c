package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/evidence"
)

// maxProblemsShown bounds the problems named in a Detail.
const maxProblemsShown = 10

// align runs a source_alignment clause: every [E12] marker in its files
// cites an id of Q, every quote in a citing sentence is in the cited text
// (whitespace- and case-normalized), and the files carry at least
// MinCitations citations between them.
func init() {
	kinds[contract.KindSourceAlignment] = func(_ context.Context, env Env, c contract.Clause, r *Result) { *r = align(env, c, *r) }
}

func align(env Env, c contract.Clause, r Result) Result {
	start := time.Now()
	defer func() { r.DurationMS = time.Since(start).Milliseconds() }()
	var q evidence.Texts = noEvidence{}
	if env.Evidence != nil {
		q = env.Evidence
	}
	var probs []string
	cites, quotes := 0, 0
	for _, f := range c.Outputs {
		content, err := readDeliverable(env.Outputs, f)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", f, strings.Replace(err.Error(), "nothing to compare", "nothing to check", 1)))
			continue
		}
		found, bad := evidence.Align(f, content, q)
		cites += len(found)
		for _, ct := range found {
			quotes += len(ct.Quotes)
		}
		for _, p := range bad {
			probs = append(probs, p.String())
		}
	}
	if c.MinCitations > 0 && cites < c.MinCitations {
		probs = append(probs, fmt.Sprintf("rule \"at least %d citations\" failed: %s carry %d; cite evidence ids as [E12] after the sentences they support",
			c.MinCitations, strings.Join(c.Outputs, ", "), cites))
	}
	r.ExitCode = 0
	if len(probs) > 0 {
		r.ExitCode = 1
		shown := probs[:min(len(probs), maxProblemsShown)]
		r.Detail = strings.Join(shown, "; ")
		if len(probs) > len(shown) {
			r.Detail += fmt.Sprintf("; and %d more", len(probs)-len(shown))
		}
		r.Stdout = strings.Join(probs, "\n")
		return r
	}
	r.Passed = true
	r.Detail = fmt.Sprintf("%d citation(s) with %d quote(s), all found in their cited evidence", cites, quotes)
	return r
}

// noEvidence is the Q of a run that has none.
type noEvidence struct{}

func (noEvidence) Text(id string) (string, error) {
	return "", fmt.Errorf("%w %s", evidence.ErrUnknown, id)
}

// NeedsSandbox reports whether any clause runs a command (a source
// alignment clause does not).
func NeedsSandbox(clauses []contract.Clause) bool {
	for _, c := range clauses {
		if c.Kind != contract.KindSourceAlignment {
			return true
		}
	}
	return false
}
