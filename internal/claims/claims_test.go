package claims_test

import (
	"encoding/json"
	"reflect"
	"slices"
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
	return ev(seq, record.TypeClaim, by, map[string]any{"id": id, "text": text, "stated_by": by, "item": item, "evidence": evidence, "assignment": by})
}

func verdict(seq int64, id, v string, evidence ...string) record.Event {
	return ev(seq, "verdict", "V1", map[string]any{"claim_id": id, "verdict": v, "evidence": evidence})
}

func boardEv(seq int64, op, id string, deps ...string) record.Event {
	p := map[string]any{"op": op, "id": id, "title": id, "objective": id}
	if len(deps) > 0 {
		p["deps"] = deps
	}
	return ev(seq, "board", "lead", p)
}

func assigned(seq int64, a, item string) record.Event {
	return ev(seq, record.TypeAssignment, "lead", map[string]any{"assignment": a, "item": item, "state": "created"})
}

func wrote(seq int64, agent, path string) record.Event {
	return ev(seq, record.TypeFileDelta, agent, map[string]any{"call_id": "c", "path": path, "bytes": 3})
}

func cites(seq int64, path string, ids ...string) record.Event {
	return ev(seq, record.TypeCitations, "runtime", map[string]any{"path": path, "hash": "sha256:x", "claims": ids})
}

func mark(seq int64, id, m string) record.Event {
	return ev(seq, record.TypeClaimMark, "lead", map[string]any{"claim": id, "mark": m, "reason": "because"})
}

func TestStatus(t *testing.T) {
	base := []record.Event{boardEv(1, "add", "T1"), boardEv(2, "add", "T2"), boardEv(3, "add", "T3", "T1", "T2"),
		boardEv(4, "resolve", "T1"), boardEv(5, "resolve", "T2")}
	tests := []struct {
		name    string
		events  []record.Event
		want    map[string]string // id -> status
		settled map[string]bool
	}{
		{"conflicting sums are disputed", []record.Event{
			claim(10, "K1", "The total is 45.", "A1", "T1", "/inputs/a.csv"),
			claim(11, "K2", "the total is 42", "A2", "T2", "/inputs/a.csv")},
			map[string]string{"K1": claims.Disputed, "K2": claims.Disputed}, map[string]bool{"K1": false}},
		{"a refuted claim no longer disputes the other", []record.Event{
			claim(10, "K1", "the total is 45", "A1", "T1"), claim(11, "K2", "the total is 42", "A2", "T2"),
			verdict(12, "K1", "refuted"), verdict(13, "K2", "supported")},
			map[string]string{"K1": claims.Refuted, "K2": claims.Corroborated}, map[string]bool{"K1": true, "K2": true}},
		{"supported on its own evidence settles despite a conflict", []record.Event{
			claim(10, "K1", "the total is 42", "A1", "T1", "/inputs/a.csv"), claim(11, "K2", "the total is 45", "A2", "T2", "/inputs/b.csv"),
			verdict(12, "K1", "supported", "/inputs/a.csv", "E2")},
			map[string]string{"K1": claims.Corroborated, "K2": claims.Disputed}, map[string]bool{"K1": true, "K2": false}},
		{"supported on other evidence does not settle a conflict", []record.Event{
			claim(10, "K1", "the total is 42", "A1", "T1", "/inputs/a.csv"), claim(11, "K2", "the total is 45", "A2", "T2"),
			verdict(12, "K1", "supported", "/inputs/b.csv")},
			map[string]string{"K1": claims.Disputed}, map[string]bool{"K1": false}},
		{"verdicts that disagree dispute", []record.Event{
			claim(10, "K1", "x holds", "A1", "T1"), verdict(12, "K1", "refuted"), verdict(13, "K1", "supported")},
			map[string]string{"K1": claims.Disputed}, nil},
		{"agreement from another source corroborates; insufficient leaves unresolved", []record.Event{
			claim(10, "K1", "the total is 42", "A1", "T1", "/inputs/a.csv"), claim(11, "K2", "the total is 42", "A2", "T2", "E3"),
			claim(12, "K3", "y is 7", "A3", "T4"), verdict(13, "K3", "insufficient")},
			map[string]string{"K1": claims.Corroborated, "K2": claims.Corroborated, "K3": claims.Unresolved}, map[string]bool{"K1": false}},
		{"a withdrawn claim disputes nothing", []record.Event{
			claim(10, "K1", "the total is 45", "A1", "T1"), claim(11, "K2", "the total is 42", "A2", "T2"), mark(12, "K1", "withdrawn")},
			map[string]string{"K2": claims.Unresolved}, nil},
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
			for id, want := range tt.settled {
				if c, _ := l.Get(id); c.Settled != want {
					t.Errorf("%s: settled %v (%s %s), want %v", id, c.Settled, c.Status, c.Why, want)
				}
			}
		})
	}
}

// The definition of docs/record.md, example included: parse (T1) →
// classify (T2) → total (T3); what the report rests on depends on who
// wrote it and what it cites.
func TestLoadBearing(t *testing.T) {
	chain := []record.Event{boardEv(1, "add", "T1"), boardEv(2, "add", "T2", "T1"), boardEv(3, "add", "T3", "T2"),
		assigned(4, "A1", "T1"), assigned(5, "A2", "T2"), assigned(6, "A3", "T3"),
		claim(10, "K1", "the file has 12 rows", "A1", "T1", "/inputs/a.csv"),
		claim(11, "K2", "7 rows are refunds", "A2", "T2", "/workspace/rows.csv"),
		claim(12, "K3", "the file is UTF-8", "A2", "T2", "/inputs/a.csv"),
		claim(13, "K4", "the refunds total 840.00", "A3", "T3", "/workspace/refunds.csv"),
		boardEv(20, "resolve", "T1"), boardEv(21, "resolve", "T2"), boardEv(22, "resolve", "T3")}
	tests := []struct {
		name   string
		events []record.Event
		want   map[string]bool
		bears  map[string]string // id -> one reason it must give
	}{
		{"the lead wrote the report citing K4 and marked K3 side", []record.Event{
			wrote(30, "lead", "/outputs/report.md"), cites(31, "/outputs/report.md", "K4"), mark(32, "K3", "side")},
			map[string]bool{"K1": false, "K2": false, "K3": false, "K4": true},
			map[string]string{"K4": "cited by /outputs/report.md"}},
		{"the subagent of the last item wrote it", []record.Event{wrote(30, "A3", "/outputs/report.md")},
			map[string]bool{"K1": false, "K2": true, "K3": true, "K4": true},
			map[string]string{"K2": "T2 → /outputs/report.md", "K4": "T3 → /outputs/report.md"}},
		{"no deliverable yet: the answer rests on the board's results", nil,
			map[string]bool{"K1": false, "K2": false, "K4": true}, map[string]string{"K4": "T3 → the answer"}},
		{"a result item without claims passes its weight on", []record.Event{
			boardEv(40, "add", "T4", "T3"), boardEv(41, "resolve", "T4")},
			map[string]bool{"K4": true, "K2": false}, map[string]string{"K4": "T3 → the answer"}},
		{"a claim that names a deliverable", []record.Event{claim(30, "K5", "wrote it", "A1", "", "/outputs/other.md")},
			map[string]bool{"K5": true}, map[string]string{"K5": "names /outputs/other.md"}},
		{"the lead's marks win", []record.Event{mark(30, "K4", "side"), mark(31, "K1", "load_bearing")},
			map[string]bool{"K4": false, "K1": true}, nil},
		{"a side claim of the producer's dependency", []record.Event{wrote(30, "A3", "/outputs/report.md"), mark(31, "K3", "side")},
			map[string]bool{"K2": true, "K3": false}, nil},
		{"reopening an item withdraws its claims", []record.Event{
			ev(30, "board", "lead", map[string]any{"op": "reopen", "id": "T3", "note": "wrong"}), boardEv(31, "resolve", "T3")},
			map[string]bool{"K4": false}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := claims.Fold(append(append([]record.Event(nil), chain...), tt.events...))
			for id, want := range tt.want {
				c, ok := l.Get(id)
				if !ok || c.LoadBearing != want {
					t.Errorf("%s: load-bearing %v (%q, side %q, withdrawn %q), want %v", id, c.LoadBearing, c.Bears, c.Side, c.Withdrawn, want)
				}
			}
			for id, why := range tt.bears {
				if c, _ := l.Get(id); !slices.Contains(c.Bears, why) {
					t.Errorf("%s bears %q; want %q among them", id, c.Bears, why)
				}
			}
		})
	}
}

// Facts read back from their JSON are the facts they were, and advance
// as they would have: the ledger of facts serialized midway and then fed
// the rest is the ledger of all the events.
func TestFactsJSONRoundTrip(t *testing.T) {
	evs := []record.Event{boardEv(1, "add", "T1"), boardEv(2, "add", "T2", "T1"), assigned(3, "A1", "T1"),
		claim(4, "K1", "The total is 45.", "A1", "T1", "/outputs/r.md"), wrote(5, "A1", "/outputs/r.md"),
		boardEv(6, "resolve", "T1"), verdict(7, "K1", "supported", "/outputs/r.md"), mark(8, "K1", "side"),
		claim(9, "K2", "The total is 46.", "A2", "T2"), cites(10, "/outputs/r.md", "K2"), boardEv(11, "reopen", "T1")}
	apply := func(f *claims.Facts, evs []record.Event) {
		for _, e := range evs {
			p, err := record.DecodePayload(e)
			if err != nil {
				t.Fatal(err)
			}
			f.Apply(e, p)
		}
	}
	for cut := range len(evs) + 1 {
		f := claims.NewFacts()
		apply(f, evs[:cut])
		raw, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		back := claims.NewFacts()
		if err := json.Unmarshal(raw, back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, f) {
			t.Fatalf("cut %d: the facts read back differ", cut)
		}
		apply(back, evs[cut:])
		if got, want := back.Ledger(), claims.Fold(evs); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut %d: ledger\n%+v\nwant\n%+v", cut, got, want)
		}
	}
}
