package claims_test

import (
	"encoding/json"
	"testing"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
)

func ev(seq int64, typ, agent string, payload map[string]any) record.Event {
	payload["seq"], payload["type"], payload["agent"] = seq, typ, agent
	raw, _ := json.Marshal(payload)
	return record.Event{Seq: seq, Type: typ, Agent: agent, Raw: raw}
}

func claim(seq int64, id, text, by, item string, evidence ...string) record.Event {
	return ev(seq, record.TypeClaim, by, map[string]any{"id": id, "text": text, "stated_by": by, "item": item, "evidence": evidence})
}

func verdict(seq int64, id, v string) record.Event {
	return ev(seq, "verdict", "verifier", map[string]any{"claim_id": id, "verdict": v})
}

func boardEv(seq int64, op, id string, deps ...string) record.Event {
	p := map[string]any{"op": op, "id": id, "title": id, "objective": id}
	if len(deps) > 0 {
		p["deps"] = deps
	}
	return ev(seq, "board", "lead", p)
}

func TestFold(t *testing.T) {
	base := []record.Event{boardEv(1, "add", "T1"), boardEv(2, "add", "T2"), boardEv(3, "add", "T3", "T1", "T2"),
		boardEv(4, "resolve", "T1"), boardEv(5, "resolve", "T2")}
	tests := []struct {
		name   string
		events []record.Event
		want   map[string]string // id -> status
		lb     map[string]bool
	}{
		{"conflicting sums are disputed and load-bearing", []record.Event{
			claim(10, "K1", "The total is 45.", "A1", "T1", "/inputs/a.csv"),
			claim(11, "K2", "the total is 42", "A2", "T2", "/inputs/a.csv")},
			map[string]string{"K1": claims.Disputed, "K2": claims.Disputed}, map[string]bool{"K1": true, "K2": true}},
		{"a refuted claim no longer disputes the other", []record.Event{
			claim(10, "K1", "the total is 45", "A1", "T1"), claim(11, "K2", "the total is 42", "A2", "T2"),
			verdict(12, "K1", "refuted"), verdict(13, "K2", "supported")},
			map[string]string{"K1": claims.Refuted, "K2": claims.Corroborated}, nil},
		{"verdicts that disagree dispute", []record.Event{
			claim(10, "K1", "x holds", "A1", "T1"), verdict(12, "K1", "refuted"), verdict(13, "K1", "supported")},
			map[string]string{"K1": claims.Disputed}, nil},
		{"agreement from another source corroborates; insufficient leaves unresolved", []record.Event{
			claim(10, "K1", "the total is 42", "A1", "T1", "/inputs/a.csv"), claim(11, "K2", "the total is 42", "A2", "T2", "E3"),
			claim(12, "K3", "y is 7", "A3", "T4"), verdict(13, "K3", "insufficient")},
			map[string]string{"K1": claims.Corroborated, "K2": claims.Corroborated, "K3": claims.Unresolved}, map[string]bool{"K3": false}},
		{"a deliverable rests on it", []record.Event{claim(10, "K1", "z", "A1", "", "/outputs/report.md")},
			map[string]string{"K1": claims.Unresolved}, map[string]bool{"K1": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := claims.Fold(append(append([]record.Event(nil), base...), tt.events...))
			for id, want := range tt.want {
				c, ok := l.Get(id)
				if !ok || c.Status != want {
					t.Errorf("%s: status %q (%s), want %q", id, c.Status, c.Why, want)
				}
			}
			for id, want := range tt.lb {
				if c, _ := l.Get(id); c.LoadBearing != want {
					t.Errorf("%s: load-bearing %v (%v), want %v", id, c.LoadBearing, c.Bears, want)
				}
			}
		})
	}
}
