package evidence

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Entry is one id of Q as `apodex evidence` lists it.
type Entry struct {
	ID        string      `json:"id"`
	Kind      string      `json:"kind"`
	Source    string      `json:"source"`
	Span      record.Span `json:"span"`
	SHA256    string      `json:"sha256"`
	Retrieved string      `json:"retrieved"`
	Agent     string      `json:"agent,omitempty"`
	Query     string      `json:"query,omitempty"`
	Text      string      `json:"text,omitempty"`
	CitedIn   []Use       `json:"cited_in"`
}

// Listing is a run's evidence: the corpus index, if built, and every id
// with where the outputs cite it.
type Listing struct {
	RunID    string              `json:"run_id"`
	Corpus   *record.CorpusIndex `json:"corpus,omitempty"`
	Evidence []Entry             `json:"evidence"`
}

// List reads the evidence of the run in dir from its record; withText
// adds each id's exact text from the blobs.
func List(dir string, withText bool) (Listing, error) {
	c, err := record.Read(dir)
	if err != nil {
		return Listing{}, err
	}
	var items []Item
	agents := map[string]string{}
	cited := Cited{}
	list := Listing{RunID: filepath.Base(dir), Evidence: []Entry{}}
	for _, e := range c.Events {
		p, err := record.DecodePayload(e)
		if err != nil {
			continue // another reader says what is wrong with it
		}
		switch p := p.(type) {
		case *Item:
			if items, err = Next(items, e, p); err != nil {
				return Listing{}, err
			}
			agents[p.ID] = e.Agent
		case *record.CorpusIndex:
			list.Corpus = p
		}
		cited.Apply(e, p)
	}
	uses := cited.With(filepath.Join(dir, "outputs"))
	for _, it := range items {
		en := Entry{ID: it.ID, Kind: it.Kind, Source: it.Source, Span: it.Span, SHA256: it.SHA256,
			Retrieved: it.Retrieved.UTC().Format("2006-01-02T15:04:05Z"), Agent: agents[it.ID], Query: it.Query, CitedIn: uses[it.ID]}
		if en.CitedIn == nil {
			en.CitedIn = []Use{}
		}
		if withText {
			en.Text, _ = ReadText(dir, it)
		}
		list.Evidence = append(list.Evidence, en)
	}
	return list, nil
}

// Render writes l as `apodex evidence` prints it: one line per id with
// its span and where it is cited.
func (l Listing) Render(w io.Writer) {
	if l.Corpus != nil {
		fmt.Fprintf(w, "corpus index %s (%s): %d documents, %d passages, %d files not indexed\n",
			l.Corpus.Hash, l.Corpus.State, l.Corpus.Docs, l.Corpus.Passages, len(l.Corpus.Skipped))
	}
	if len(l.Evidence) == 0 {
		fmt.Fprintf(w, "run %s holds no evidence (no search, fetch, or read of an input)\n", l.RunID)
		return
	}
	for _, en := range l.Evidence {
		cited := "not cited"
		if len(en.CitedIn) > 0 {
			var ws []string
			for _, u := range en.CitedIn {
				ws = append(ws, u.Where)
			}
			cited = "cited in " + strings.Join(ws, ", ")
		}
		fmt.Fprintf(w, "%-5s %-6s %s lines %d-%d  [%s]\n", en.ID, en.Kind, en.Source, en.Span.From, en.Span.To, cited)
	}
}
