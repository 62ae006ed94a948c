package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
)

// evidenceEntry is one id of Q as `apodex evidence` lists it.
type evidenceEntry struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"`
	Source    string         `json:"source"`
	Span      record.Span    `json:"span"`
	SHA256    string         `json:"sha256"`
	Retrieved string         `json:"retrieved"`
	Agent     string         `json:"agent,omitempty"`
	Query     string         `json:"query,omitempty"`
	Text      string         `json:"text,omitempty"`
	CitedIn   []evidence.Use `json:"cited_in"`
}

type evidenceList struct {
	RunID    string              `json:"run_id"`
	Corpus   *record.CorpusIndex `json:"corpus,omitempty"`
	Evidence []evidenceEntry     `json:"evidence"`
}

func cmdEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evidence", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object (with each id's exact text)")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	c, err := record.Read(dir)
	if err != nil {
		return err
	}
	items, err := evidence.Fold(c.Events)
	if err != nil {
		return err
	}
	q, err := evidence.FromRecord(dir)
	if err != nil {
		return err
	}
	agents := map[string]string{}
	list := evidenceList{RunID: filepath.Base(dir), Evidence: []evidenceEntry{}}
	for _, e := range c.Events {
		switch e.Type {
		case record.TypeEvidence:
			var it record.Evidence
			if e.Decode(&it) == nil {
				agents[it.ID] = e.Agent
			}
		case record.TypeCorpusIndex:
			var ci record.CorpusIndex
			if e.Decode(&ci) == nil {
				list.Corpus = &ci
			}
		}
	}
	uses := evidence.Uses(c.Events, filepath.Join(dir, "outputs"))
	for _, it := range items {
		en := evidenceEntry{ID: it.ID, Kind: it.Kind, Source: it.Source, Span: it.Span, SHA256: it.SHA256,
			Retrieved: it.Retrieved.UTC().Format("2006-01-02T15:04:05Z"), Agent: agents[it.ID], Query: it.Query, CitedIn: uses[it.ID]}
		if en.CitedIn == nil {
			en.CitedIn = []evidence.Use{}
		}
		if *jsonOut {
			en.Text, _ = q.Text(it.ID)
		}
		list.Evidence = append(list.Evidence, en)
	}
	if *jsonOut {
		writeJSON(stdout, list)
		return nil
	}
	if list.Corpus != nil {
		fmt.Fprintf(stdout, "corpus index %s (%s): %d documents, %d passages, %d files not indexed\n",
			list.Corpus.Hash, list.Corpus.State, list.Corpus.Docs, list.Corpus.Passages, len(list.Corpus.Skipped))
	}
	if len(list.Evidence) == 0 {
		fmt.Fprintf(stdout, "run %s holds no evidence (no search, fetch, or read of an input)\n", list.RunID)
		return nil
	}
	for _, en := range list.Evidence {
		cited := "not cited"
		if len(en.CitedIn) > 0 {
			var ws []string
			for _, u := range en.CitedIn {
				ws = append(ws, u.Where)
			}
			cited = "cited in " + strings.Join(ws, ", ")
		}
		fmt.Fprintf(stdout, "%-5s %-6s %s lines %d-%d  [%s]\n", en.ID, en.Kind, en.Source, en.Span.From, en.Span.To, cited)
	}
	return nil
}
