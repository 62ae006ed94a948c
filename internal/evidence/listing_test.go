package evidence

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

func TestListingRender(t *testing.T) {
	var b strings.Builder
	Listing{RunID: "r"}.Render(&b)
	if b.String() != "run r holds no evidence (no search, fetch, or read of an input)\n" {
		t.Errorf("empty listing: %q", b.String())
	}
	b.Reset()
	Listing{RunID: "r", Evidence: []Entry{
		{ID: "E1", Kind: "input", Source: "/inputs/a.txt", Span: record.Span{From: 1, To: 3}, CitedIn: []Use{{Where: "/outputs/r.md:2"}, {Where: "report A1 claim 1"}}},
		{ID: "E2", Kind: "fetch", Source: "http://x", Span: record.Span{From: 4, To: 4}},
	}}.Render(&b)
	want := "E1    input  /inputs/a.txt lines 1-3  [cited in /outputs/r.md:2, report A1 claim 1]\n" +
		"E2    fetch  http://x lines 4-4  [not cited]\n"
	if b.String() != want {
		t.Errorf("Render:\n%q\nwant\n%q", b.String(), want)
	}
}
