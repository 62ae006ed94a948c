package runstate_test

import (
	"reflect"
	"testing"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/state"
)

// The sub-views are folded by the one Apply: what the state holds is what
// each package's own reader makes of the same events.
func TestSubViewsFoldedByApply(t *testing.T) {
	b := newBuilder(t)
	title := "T1"
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"dispatch"}})
	b.add(record.TypeBoard, "lead", record.Board{Op: "add", ID: "T1", Title: &title, Objective: &title})
	b.add(record.TypeAssignment, "lead", record.Assignment{Assignment: "A1", Item: "T1", Role: "r", State: "created"})
	b.add(record.TypeToolCall, "A1", record.ToolCall{CallID: "c1", Name: "write_file", Turn: 1, Arguments: `{"path":"/outputs/r.md"}`})
	b.add(record.TypeFileDelta, "A1", record.FileDelta{CallID: "c1", Path: "/outputs/r.md", After: "sha256:aa", Bytes: 3})
	b.add(record.TypeToolResult, "A1", record.ToolResult{CallID: "c1", Name: "write_file", Output: "ok"})
	b.add(record.TypeEvidence, "A1", record.Evidence{ID: "E1", Kind: "file", Source: "/inputs/a.csv", SHA256: evidence.Hash("x"), Text: "x", Bytes: 1})
	b.add(record.TypeReport, "A1", record.Report{Assignment: "A1", Item: "T1", ReportBody: record.ReportBody{Summary: "s",
		Claims: []record.ReportClaim{{Text: "The total is 45.", Evidence: []string{"E1"}}}}})
	b.add(record.TypeClaim, "A1", record.Claim{ID: "K1", Text: "The total is 45.", StatedBy: "A1", Item: "T1", Evidence: []string{"E1"}, Assignment: "A1"})
	b.add(record.TypeVerdict, "V1", record.Verdict{Claim: "The total is 45.", ClaimID: "K1", Verdict: "supported", Evidence: []string{"E1"}})
	b.add(record.TypeCitations, "", record.Citations{Path: "/outputs/r.md", Hash: "sha256:aa", Claims: []string{"K1"}})
	st := b.load()

	c, err := record.Read(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	l := st.Claims.Ledger()
	if len(l.Claims) != 1 || l.Claims[0].Status != claims.Corroborated || !l.Claims[0].LoadBearing || len(l.Claims[0].Verdicts) != 1 {
		t.Fatalf("ledger %+v, want K1 corroborated and load-bearing", l.Claims)
	}
	if want := claims.Fold(c.Events); !reflect.DeepEqual(l, want) {
		t.Errorf("ledger of the state\n%+v\nclaims.Fold\n%+v", l, want)
	}
	if a := st.Files.Artifacts["/outputs/r.md"]; a.Producer != "A1" || a.Tool != "write_file" || st.FilesErr != nil {
		t.Errorf("artifact %+v (err %v), want /outputs/r.md by A1's write_file", a, st.FilesErr)
	}
	want, err := state.FromRecord(c.Events)
	if err != nil || !reflect.DeepEqual(st.Files.Index("r"), want.Index("r")) {
		t.Errorf("W_t of the state differs from state.FromRecord (%v)", err)
	}
	if u := st.Cited["E1"]; len(u) != 1 || u[0].Where != "report A1 claim 1" {
		t.Errorf("E1 cited in %+v, want report A1 claim 1", u)
	}
	if !reflect.DeepEqual(st.Cited.With(""), evidence.Uses(c.Events, "")) {
		t.Errorf("citations of the state differ from evidence.Uses")
	}
	if st.EvidenceAgent["E1"] != "A1" || st.EvidenceErr != nil {
		t.Errorf("E1 retrieved by %q (err %v)", st.EvidenceAgent["E1"], st.EvidenceErr)
	}
}

// An evidence id out of sequence is noted, not fatal: the rest still folds.
func TestEvidenceOutOfSequence(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	b.add(record.TypeEvidence, "main", record.Evidence{ID: "E2", Kind: "file", Source: "/inputs/a"})
	st := b.load()
	if st.EvidenceErr == nil || len(st.Evidence) != 1 {
		t.Errorf("evidence %v, err %v: want the item kept and the gap noted", st.Evidence, st.EvidenceErr)
	}
}
