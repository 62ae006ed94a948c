package team

import (
	"context"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/verify/claim"
)

// Gate is the final-answer gate (R-PLAN-2): finish is refused while any
// active item is open or in progress and, for a run started in planning
// mode, until one branch was delegated and one claim independently
// verified; then while a load-bearing claim is refuted.
//
// Once those pass, adaptive effort (package verify/claim) may defer finish
// for one more wave on unsettled load-bearing claims, and synthesis
// (package synth) writes the report deliverables. Gate is the lead's
// agent.Config Gate; ctx bounds the agents the gate starts.
func (t *Team) Gate(ctx context.Context) func(summary string) error {
	return func(string) error { return t.gate(ctx) }
}

func (t *Team) gate(ctx context.Context) error {
	if err := t.gateBoard(); err != nil {
		return err
	}
	t.writer.RecordCitations()
	if err := t.gateRefuted(t.ledger()); err != nil {
		return err
	}
	outcome, err := t.checker.Effort(ctx)
	if err != nil {
		t.mu.Lock()
		t.notices = append(t.notices, notice{Assignment: "effort", Text: outcome})
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
		return err
	}
	return t.writer.Synthesize(ctx)
}

// ledger is the run's claim ledger.
func (t *Team) ledger() *claims.Ledger { return t.runState.Ledger() }

// gateRefuted refuses finish while a load-bearing claim is refuted: the
// deliverables would rest on something a verifier showed false.
func (t *Team) gateRefuted(l *claims.Ledger) error {
	var bad []string
	for _, c := range l.Claims {
		if c.Status != claims.Refuted || !c.LoadBearing || c.Withdrawn != "" {
			continue
		}
		s := fmt.Sprintf("%s %q", c.ID, claim.ClipBytes(c.Text, 120))
		if c.StatedBy != "" {
			s += " (by " + c.StatedBy
			if c.Item != "" {
				s += " on " + c.Item
			}
			s += ")"
		}
		s += " is refuted and load-bearing (" + strings.Join(c.Bears, "; ") + ")"
		if n := len(c.Verdicts); n > 0 {
			v := c.Verdicts[n-1]
			if v.Location != "" {
				s += ", at " + v.Location
			}
			if v.Repair != "" {
				s += ", repair: " + v.Repair
			}
		}
		switch {
		case c.Item != "":
			s += fmt.Sprintf(": reopen %s (board_reopen), have it redone and resolve it again, or withdraw %s (mark_claim {\"claim\": %q, \"mark\": \"withdrawn\", \"reason\": …}) if the deliverables no longer rest on it", c.Item, c.ID, c.ID)
		default:
			s += fmt.Sprintf(": remove what cites it from the deliverables, or withdraw %s (mark_claim {\"claim\": %q, \"mark\": \"withdrawn\", \"reason\": …})", c.ID, c.ID)
		}
		bad = append(bad, s)
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("a refuted claim is load-bearing: %s", joinSemi(bad))
}
