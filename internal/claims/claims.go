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
//     disputed — its last two decisive verdicts disagree;
//     corroborated, settled — its latest decisive verdict is supported and
//     the verifier was given every evidence ref the claim cites (a conflict
//     with an unverified claim does not unsettle it);
//     disputed — it conflicts with a live claim that is not refuted (same
//     words with different numbers, stated by another agent);
//     corroborated — a supported verdict on other evidence, or another
//     agent stated the same claim citing a different source;
//     unresolved — otherwise (no verdict, or only insufficient ones);
//     a refuted claim is settled too;
//   - a claim is withdrawn when the lead withdrew it (mark_claim) or its
//     item was reopened after it was stated (the item is redone: its old
//     claims no longer bear on it); a withdrawn claim keeps its status but
//     bears nothing and disputes nothing;
//   - a claim is load-bearing when the deliverables rest on it (Weigh):
//     a deliverable cites it ([K3]) or its evidence names a deliverable, or
//     it was stated on a resolved item that a deliverable's producer
//     depended on; the lead can mark a claim side (never load-bearing) or
//     load_bearing (always, unless withdrawn).
package claims

import (
	"encoding/json"
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

// Marks the lead can give a claim (a claim_mark event).
const (
	MarkSide        = "side"
	MarkLoadBearing = "load_bearing"
	MarkWithdrawn   = "withdrawn"
)

// Verdict is one verifier finding on a claim.
type Verdict struct {
	Seq      int64    `json:"seq"`
	By       string   `json:"by,omitempty"` // the verifier's agent id (V1, …)
	Verdict  string   `json:"verdict"`
	Location string   `json:"location,omitempty"`
	Repair   string   `json:"repair,omitempty"`
	Checks   []string `json:"checks,omitempty"`
	// Evidence are the refs the verifier was given.
	Evidence []string `json:"evidence,omitempty"`
}

// Claim is one node of the claim–evidence graph.
type Claim struct {
	ID         string    `json:"id"`
	Seq        int64     `json:"seq"` // of its claim event
	Text       string    `json:"text"`
	StatedBy   string    `json:"stated_by"`
	Item       string    `json:"item,omitempty"`
	Assignment string    `json:"assignment,omitempty"`
	Evidence   []string  `json:"evidence,omitempty"`
	Artifacts  []string  `json:"artifacts,omitempty"`
	Verdicts   []Verdict `json:"verdicts,omitempty"`
	Status     string    `json:"status"`
	// Why says what decided the status.
	Why string `json:"why"`
	// Settled: a verifier decided it (refuted, or supported on its own
	// evidence); effort never goes back to it.
	Settled     bool `json:"settled"`
	LoadBearing bool `json:"load_bearing"`
	// Bears says what rests on it: "cited by /outputs/r.md", "T3 →
	// /outputs/r.md" (a resolved item a deliverable's producer used), "T3
	// → the answer" (no deliverable written: the lead's answer), "marked by
	// the lead".
	Bears []string `json:"bears,omitempty"`
	// Side is why the lead marked it side (not load-bearing).
	Side string `json:"side,omitempty"`
	// Withdrawn says why it no longer counts: withdrawn by the lead, or its
	// item was reopened after it.
	Withdrawn     string   `json:"withdrawn,omitempty"`
	ConflictsWith []string `json:"conflicts_with,omitempty"`
	AgreesWith    []string `json:"agrees_with,omitempty"`

	mark, markWhy string // the lead's last mark
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

// deliverablesOf is the part of a contract's canonical JSON the ledger reads.
type deliverablesOf struct {
	Deliverables []struct {
		Path string `json:"path"`
	} `json:"deliverables"`
}

// Facts is what the record has said about claims so far: the claims with
// their verdicts, the lead's marks, the reopened items, the board and what
// the deliverables rest on. It advances one decoded event at a time
// (Apply); Ledger derives the ledger from it. runstate keeps one per run.
type Facts struct {
	Claims   []Claim                     `json:"claims,omitempty"` // as stated, with their verdicts
	Marks    map[string]record.ClaimMark `json:"marks,omitempty"`  // claim id -> the lead's last mark
	Reopened map[string]int64            `json:"reopened,omitempty"`
	// Board is the board as the ledger sees it: an event the board refuses
	// is left out (and the next ones still apply).
	Board       *board.Board   `json:"-"`
	boardEvents []record.Board // the board events Board applied, in order
	w           *weights
	index       map[string]int
}

// NewFacts is the facts before the first event.
func NewFacts() *Facts {
	return &Facts{Marks: map[string]record.ClaimMark{}, Reopened: map[string]int64{}, Board: &board.Board{}, w: newWeights(), index: map[string]int{}}
}

// Apply takes what one event says about claims; p is its payload as
// record.DecodePayload returns it.
func (f *Facts) Apply(e record.Event, p any) {
	switch p := p.(type) {
	case *record.Claim:
		if p.ID != "" {
			f.index[p.ID] = len(f.Claims)
			f.Claims = append(f.Claims, Claim{ID: p.ID, Seq: e.Seq, Text: p.Text, StatedBy: p.StatedBy, Item: p.Item,
				Assignment: p.Assignment, Evidence: p.Evidence, Artifacts: p.Artifacts})
		}
	case *record.Verdict:
		if i, ok := f.index[p.ClaimID]; ok {
			f.Claims[i].Verdicts = append(f.Claims[i].Verdicts, Verdict{Seq: e.Seq, By: e.Agent, Verdict: p.Verdict,
				Location: p.Location, Repair: p.Repair, Checks: p.Checks, Evidence: p.Evidence})
		}
	case *record.ClaimMark:
		if _, ok := f.index[p.Claim]; ok {
			f.Marks[p.Claim] = *p
		}
	case *record.Board:
		if f.Board.Apply(f.Board.Seq()+1, *p) != nil {
			break
		}
		f.boardEvents = append(f.boardEvents, *p)
		if p.Op == board.OpReopen {
			for _, id := range append([]string{p.ID}, p.Reopened...) {
				f.Reopened[id] = e.Seq
			}
		}
	case *record.Contract:
		var c deliverablesOf
		if json.Unmarshal(p.Contract, &c) == nil {
			f.w.declared = f.w.declared[:0]
			for _, d := range c.Deliverables {
				f.w.declared = append(f.w.declared, d.Path)
			}
		}
	default:
		f.w.fold(e, p)
	}
}

// Fold builds the ledger from a run's events (a reader with the events in
// hand; a run's live state keeps Facts instead). An event whose payload does
// not decode is left out.
func Fold(events []record.Event) *Ledger {
	f := NewFacts()
	for _, e := range events {
		if p, err := record.DecodePayload(e); err == nil {
			f.Apply(e, p)
		}
	}
	return f.Ledger()
}

// Ledger is the ledger the facts give now. The facts are not changed.
func (f *Facts) Ledger() *Ledger {
	l := &Ledger{}
	for _, c := range f.Claims {
		c.Verdicts = slices.Clone(c.Verdicts)
		if m, ok := f.Marks[c.ID]; ok {
			c.mark, c.markWhy = m.Mark, m.Reason
		}
		l.Claims = append(l.Claims, c)
	}
	for i := range l.Claims {
		c := &l.Claims[i]
		switch {
		case c.mark == MarkWithdrawn:
			c.Withdrawn = "withdrawn by the lead: " + c.markWhy
		case c.Item != "" && f.Reopened[c.Item] > c.Seq:
			c.Withdrawn = "its item " + c.Item + " was reopened after it"
		}
	}
	l.settle()
	f.w.weigh(l, f.Board)
	return l
}

// settle decides every claim's edges and status.
func (l *Ledger) settle() {
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
	}
	// Refuted first: a conflict with a refuted claim disputes nothing.
	for i := range l.Claims {
		c := &l.Claims[i]
		if d := decisive(c.Verdicts); len(d) > 0 && d[len(d)-1].Verdict != "supported" {
			c.Status, c.Why, c.Settled = Refuted, "its latest verdict is "+d[len(d)-1].Verdict, true
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
			if o, _ := l.Get(id); o.Status != Refuted && o.Withdrawn == "" {
				live = append(live, id)
			}
		}
		switch {
		case len(d) >= 2 && d[len(d)-1].Verdict != d[len(d)-2].Verdict:
			c.Status, c.Why = Disputed, "its last two verdicts disagree"
		case len(d) > 0 && covers(d[len(d)-1].Evidence, c.Evidence):
			c.Status, c.Why, c.Settled = Corroborated, "a verifier found it supported on its own evidence", true
		case len(live) > 0:
			c.Status, c.Why = Disputed, "it conflicts with "+strings.Join(live, ", ")
		case len(d) > 0:
			c.Status, c.Why = Corroborated, "a verifier found it supported on other evidence than it cites"
		case l.independent(*c):
			c.Status, c.Why = Corroborated, "another agent stated it from a different source"
		default:
			c.Status, c.Why = Unresolved, "no decisive verdict and no independent support"
		}
	}
}

// covers reports whether a verifier given refs saw every ref a claim cites.
func covers(refs, cited []string) bool {
	for _, r := range cited {
		if !slices.Contains(refs, strings.TrimSpace(r)) && !slices.Contains(refs, r) {
			return false
		}
	}
	return true
}

// independent reports whether an agreeing claim cites a source c does not.
func (l *Ledger) independent(c Claim) bool {
	for _, id := range c.AgreesWith {
		o, _ := l.Get(id)
		if o.Withdrawn != "" {
			continue
		}
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

var numbers = regexp.MustCompile(`-?[0-9][0-9.,]*[0-9]|-?[0-9]`)

// skeleton is a claim's words with its numbers blanked: two claims with
// the same skeleton and different numbers conflict.
func skeleton(text string) string {
	s := numbers.ReplaceAllString(strings.ToLower(text), "#")
	return strings.Join(strings.Fields(strings.Trim(s, " .")), " ")
}
