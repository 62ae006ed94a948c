package evidence

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type texts map[string]string

func (t texts) Text(id string) (string, error) {
	if s, ok := t[id]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%w %s", ErrUnknown, id)
}

func TestCitations(t *testing.T) {
	doc := "# Answer\n\nThe lamp was lit in 1871. The history says \"first lit on 14 March\n1871\" [E2]. Another claim [E3, E4].\n\nHe said \"x. y\" and \"z\". [E5]\nNo marker \"here\".\n"
	got := Citations(doc)
	if len(got) != 3 {
		t.Fatalf("%d citations: %+v", len(got), got)
	}
	if got[0].Line != 4 || !reflect.DeepEqual(got[0].IDs, []string{"E2"}) || !reflect.DeepEqual(got[0].Quotes, []string{"first lit on 14 March\n1871"}) {
		t.Errorf("first: %+v", got[0])
	}
	if !reflect.DeepEqual(got[1].IDs, []string{"E3", "E4"}) || len(got[1].Quotes) != 0 {
		t.Errorf("second: %+v", got[1])
	}
	// A marker after the full stop cites the sentence before; a ". " inside
	// quotes is no sentence end.
	if got[2].Line != 6 || !reflect.DeepEqual(got[2].Quotes, []string{"x. y", "z"}) {
		t.Errorf("third: %+v", got[2])
	}
	// Several markers in one sentence: each quote goes to the nearest
	// marker after it; one after the last marker goes to that one.
	got = Citations(`The deed says "A" [E25], and the log "B" [E23], then "C".`)
	if len(got) != 2 || !reflect.DeepEqual(got[0].Quotes, []string{"A"}) || !reflect.DeepEqual(got[1].Quotes, []string{"B", "C"}) {
		t.Errorf("clause by clause: %+v", got)
	}
}

func TestAlign(t *testing.T) {
	q := texts{"E1": "The lamp was FIRST lit on 14 March 1871\nby keeper Elias Marrow.", "E2": "Other text."}
	cases := []struct {
		name, doc string
		want      []string // substrings of the problems, in order
	}{
		{"exact", `It was "first lit on 14 March 1871" [E1].`, nil},
		{"case and white space", "It was \"First  lit on 14 march\n1871 by Keeper\" [E1].", nil},
		{"curly quotes", "It was “first lit on 14 March 1871” [E1].", nil},
		{"one of several ids", `It was "by keeper Elias Marrow" [E2, E1].`, nil},
		{"misquote", `It was "first lit on 15 March 1871" [E1].`, []string{"answer.md:1: E1 \"first lit on 15 March 1871\": rule \"a quote is in the evidence its citation names\" failed"}},
		{"wrong id", "Line one.\n\nIt was \"first lit\" [E2].", []string{"answer.md:3: E2 \"first lit\""}},
		{"unknown id", `It was lit [E999].`, []string{`answer.md:1: E999: rule "cited ids exist" failed: E999 is not in the run's evidence`}},
		{"no quote", `It was lit in 1871 [E1].`, nil},
		{"clause by clause", `It was "first lit on 14 March 1871" [E1], and "Other text" [E2].`, nil},
		{"a quote after the last marker", `As [E1] says, "by keeper Elias Marrow".`, nil},
		{"a quote cited by the wrong clause", `It was "Other text" [E1], and "first lit" [E2].`, []string{
			`answer.md:1: E1 "Other text": rule "a quote is in the evidence its citation names" failed: the quote is attributed to [E1]`,
			`answer.md:1: E2 "first lit"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, probs := Align("/outputs/answer.md", c.doc, q)
			if len(probs) != len(c.want) {
				t.Fatalf("problems %v, want %d", probs, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(probs[i].String(), w) {
					t.Errorf("problem %q lacks %q", probs[i].String(), w)
				}
			}
		})
	}
}

func FuzzCitations(f *testing.F) {
	f.Add("a \"b\" [E1]. c [E2, E3]\n\n\"d. e\" [E4]")
	f.Add("[E1][E2] \"“unbalanced [E0]")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range Citations(s) {
			if c.Line < 1 || len(c.IDs) == 0 {
				t.Fatalf("bad citation %+v", c)
			}
		}
	})
}
