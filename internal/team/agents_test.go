package team

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// Verifiers of the lead's verify calls are numbered in the order the calls
// are on the record, whichever starts first; runtime verifiers take the
// next number; a team rebuilt from the record (a resume) goes on from it.
func TestVerifierIDsFollowTheRecord(t *testing.T) {
	log, err := record.Create(filepath.Join(t.TempDir(), "run"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for _, id := range []string{"c1", "c2", "c3"} {
		log.Append(record.TypeToolCall, "lead", record.ToolCall{CallID: id, Name: "verify"})
	}
	log.Append(record.TypeToolCall, "A1", record.ToolCall{CallID: "c4", Name: "verify"}) // not the lead's
	tm := &Team{cfg: Config{Log: log}}
	got := []string{tm.verifierID("c3"), tm.verifierID("c1"), tm.takeID(verifierPrefix), tm.verifierID("c2")}
	if want := "V3 V1 V4 V2"; strings.Join(got, " ") != want {
		t.Fatalf("ids %v, want %s", got, want)
	}
	for _, id := range []string{"V1", "V2", "V3", "V4"} {
		tm.started(id, record.AgentStarted{Role: "verifier"})
	}
	log.Append(record.TypeToolCall, "lead", record.ToolCall{CallID: "c5", Name: "verify"})

	resumed := &Team{cfg: Config{Log: log}}
	if id := resumed.verifierID("c5"); id != "V5" {
		t.Errorf("after a resume the next verify call got %s, want V5", id)
	}
	if id := resumed.verifierID("c2"); id != "V2" {
		t.Errorf("after a resume c2's verifier is %s, want V2", id)
	}
	if id := resumed.takeID(investigatorPrefix); id != "I1" {
		t.Errorf("first investigator %s", id)
	}
}

func TestFindClaim(t *testing.T) {
	tm := &Team{claims: []record.Claim{{ID: "K1", Text: "The total is 42."}, {ID: "K2", Text: "the  mean is 21"}, {ID: "K3", Text: "The total is 42"}}}
	for _, c := range []struct {
		ref, want, err string
	}{
		{"K2", "K2", ""},
		{"[k1]", "K1", ""},
		{`"the total is 42"`, "K3", ""}, // the latest with those words
		{"The mean is 21.", "K2", ""},
		{"K9", "", "no claim K9: the ledger holds K1 to K3"},
		{"the median is 20", "", ""},
	} {
		k, found, err := tm.findClaim(c.ref)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.ref, err, c.err)
			}
		case err != nil || found != (c.want != "") || k.ID != c.want:
			t.Errorf("%q: %q found=%v err=%v, want %q", c.ref, k.ID, found, err, c.want)
		}
	}
}
