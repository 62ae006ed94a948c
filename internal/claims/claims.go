// Package claims is the claim ledger of a run (SPEC R-VERIFY-1, R-SYNTH-1):
// every claim a report made, with its stable id K<n>, its evidence, the
// verdicts on it, its status and whether it is load-bearing.
//
// Guarantees:
//   - the ledger is a pure fold over the record (Fold): the same events give
//     the same ledger, and nothing but events is read;
//   - ids are the claim events' ids, K1, K2, … in record order, stable for
//     the run's life;
//   - every claim has exactly one status, decided in this order:
//     refuted — its latest decisive verdict (supported, refuted,
//     format_violation) is refuted or format_violation;
//     disputed — it conflicts with a claim that is not refuted (same words
//     with different numbers, stated by another agent), or its last two
//     decisive verdicts disagree;
//     corroborated — independent support: a supported verdict (a verifier
//     that read or recomputed it), or another agent stated the same claim
//     citing a different source;
//     unresolved — otherwise (no verdict, or only insufficient ones);
//   - a claim is load-bearing when its item is resolved and an item that
//     is not cancelled depends on that item, or when its evidence or its
//     report's artifacts name a deliverable (a contract deliverable path;
//     without deliverables, any /outputs/ path).
package claims

import (
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
)

// Statuses of a claim.
const (
	Corroborated = "corroborated"
	Disputed     = "disputed"
	Refuted      = "refuted"
	Unresolved   = "unresolved"
)

// Verdict is one verifier finding on a claim.
type Verdict struct {
	Seq      int64    `json:"seq"`
	Verdict  string   `json:"verdict"`
	Location string   `json:"location,omitempty"`
	Repair   string   `json:"repair,omitempty"`
	Checks   []string `json:"checks,omitempty"`
}

// Claim is one node of the claim–evidence graph.
type Claim struct {
	ID        string    `json:"id"`
	Text      string    `json:"text"`
	StatedBy  string    `json:"stated_by"`
	Item      string    `json:"item,omitempty"`
	Evidence  []string  `json:"evidence,omitempty"`
	Artifacts []string  `json:"artifacts,omitempty"`
	Verdicts  []Verdict `json:"verdicts,omitempty"`
	Status    string    `json:"status"`
	// Why says what decided the status.
	Why         string `json:"why"`
	LoadBearing bool   `json:"load_bearing"`
	// Bears says what rests on it (items, deliverables).
	Bears         []string `json:"bears,omitempty"`
	ConflictsWith []string `json:"conflicts_with,omitempty"`
	AgreesWith    []string `json:"agrees_with,omitempty"`
}

// Ledger is the run's claims in id order.
type Ledger struct {
	Claims []Claim `json:"claims"`
}

// Get returns the claim with id.
func (l *Ledger) Get(id string) (Claim, bool) {
	for _, c := range l.Claims {
		if strings.EqualFold(c.ID, id) {
			return c, true
		}
	}
	return Claim{}, false
}

// Decisive reports whether a verdict settles a claim one way or the other.
func Decisive(v string) bool { return v == "supported" || v == "refuted" || v == "format_violation" }

type verdictEvent struct {
	ClaimID string `json:"claim_id"`
	Verdict
}

type contractEvent struct {
	Contract struct {
		Deliverables []struct {
			Path string `json:"path"`
		} `json:"deliverables"`
	} `json:"contract"`
}

// Fold builds the ledger from a run's events.
func Fold(events []record.Event) *Ledger {
	l := &Ledger{}
	index := map[string]int{}
	b := &board.Board{} // a board event the board refuses is left out
	var deliverables []string
	for _, e := range events {
		switch e.Type {
		case record.TypeClaim:
			var k record.Claim
			if e.Decode(&k) == nil && k.ID != "" {
				index[k.ID] = len(l.Claims)
				l.Claims = append(l.Claims, Claim{ID: k.ID, Text: k.Text, StatedBy: k.StatedBy, Item: k.Item, Evidence: k.Evidence, Artifacts: k.Artifacts})
			}
		case record.TypeVerdict:
			var v verdictEvent
			if e.Decode(&v) == nil {
				if i, ok := index[v.ClaimID]; ok {
					v.Verdict.Seq = e.Seq
					l.Claims[i].Verdicts = append(l.Claims[i].Verdicts, v.Verdict)
				}
			}
		case record.TypeBoard:
			var be board.Event
			if e.Decode(&be) == nil {
				b.Apply(b.Seq()+1, be)
			}
		case record.TypeContract:
			var ce contractEvent
			if e.Decode(&ce) == nil {
				deliverables = deliverables[:0]
				for _, d := range ce.Contract.Deliverables {
					deliverables = append(deliverables, d.Path)
				}
			}
		}
	}
	l.settle(b, deliverables)
	return l
}

// settle decides every claim's edges, status and load-bearing flag.
func (l *Ledger) settle(b *board.Board, deliverables []string) {
	for i := range l.Claims {
		c := &l.Claims[i]
		for j := range l.Claims {
			o := l.Claims[j]
			if i == j || o.StatedBy == c.StatedBy || skeleton(o.Text) != skeleton(c.Text) {
				continue
			}
			if slices.Equal(numbers.FindAllString(o.Text, -1), numbers.FindAllString(c.Text, -1)) {
				c.AgreesWith = append(c.AgreesWith, o.ID)
			} else {
				c.ConflictsWith = append(c.ConflictsWith, o.ID)
			}
		}
		c.LoadBearing, c.Bears = loadBearing(*c, b, deliverables)
	}
	// Refuted first: a conflict with a refuted claim disputes nothing.
	for i := range l.Claims {
		c := &l.Claims[i]
		if d := decisive(c.Verdicts); len(d) > 0 && d[len(d)-1].Verdict != "supported" {
			c.Status, c.Why = Refuted, "its latest verdict is "+d[len(d)-1].Verdict
		}
	}
	for i := range l.Claims {
		c := &l.Claims[i]
		if c.Status == Refuted {
			continue
		}
		d := decisive(c.Verdicts)
		var live []string
		for _, id := range c.ConflictsWith {
			if o, _ := l.Get(id); o.Status != Refuted {
				live = append(live, id)
			}
		}
		switch {
		case len(live) > 0:
			c.Status, c.Why = Disputed, "it conflicts with "+strings.Join(live, ", ")
		case len(d) >= 2 && d[len(d)-1].Verdict != d[len(d)-2].Verdict:
			c.Status, c.Why = Disputed, "its last two verdicts disagree"
		case len(d) > 0:
			c.Status, c.Why = Corroborated, "a verifier found it supported"
		case l.independent(*c):
			c.Status, c.Why = Corroborated, "another agent stated it from a different source"
		default:
			c.Status, c.Why = Unresolved, "no decisive verdict and no independent support"
		}
	}
}

// independent reports whether an agreeing claim cites a source c does not.
func (l *Ledger) independent(c Claim) bool {
	for _, id := range c.AgreesWith {
		o, _ := l.Get(id)
		for _, ref := range o.Evidence {
			if !slices.Contains(c.Evidence, ref) {
				return true
			}
		}
	}
	return false
}

func decisive(vs []Verdict) []Verdict {
	var out []Verdict
	for _, v := range vs {
		if Decisive(v.Verdict) {
			out = append(out, v)
		}
	}
	return out
}

func loadBearing(c Claim, b *board.Board, deliverables []string) (bool, []string) {
	var bears []string
	if it, err := b.Get(c.Item); err == nil && it.State == board.Resolved {
		for _, dep := range b.Dependents(it.ID) {
			if d, err := b.Get(dep); err == nil && d.State != board.Cancelled {
				bears = append(bears, dep)
			}
		}
	}
	for _, ref := range append(slices.Clone(c.Evidence), c.Artifacts...) {
		ref = strings.TrimSpace(ref)
		deliverable := slices.Contains(deliverables, ref) || len(deliverables) == 0 && strings.HasPrefix(ref, "/outputs/")
		if deliverable && !slices.Contains(bears, ref) {
			bears = append(bears, ref)
		}
	}
	return len(bears) > 0, bears
}

var numbers = regexp.MustCompile(`-?[0-9][0-9.,]*[0-9]|-?[0-9]`)

// skeleton is a claim's words with its numbers blanked: two claims with
// the same skeleton and different numbers conflict.
func skeleton(text string) string {
	s := numbers.ReplaceAllString(strings.ToLower(text), "#")
	return strings.Join(strings.Fields(strings.Trim(s, " .")), " ")
}
