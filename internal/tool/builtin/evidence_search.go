package builtin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/corpus"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

const (
	defaultSearchK = 8
	maxSearchK     = 20
)

type searchArgs struct {
	Query string `json:"query" desc:"Words to look for (BM25 ranking); \"an exact phrase\" in double quotes; +word must occur, -word must not; path:word or title:word search a document's path or title."`
	K     int    `json:"k,omitempty" desc:"How many passages to return (default 8, at most 20)."`
}

func searchTool(e *EvidenceEnv) tool.Tool {
	return tool.Define("search",
		"Search the task's document corpus (at /inputs/corpus) and return the best-matching passages, each with an evidence id (E1, E2, …), its source path, line range, score and exact text. Cite a passage by its id, e.g. [E3], and quote its text exactly; fetch an id or a path to read the whole document.",
		e.ObservationLimit,
		func(ctx context.Context, a searchArgs) tool.Result { return search(ctx, e, a) })
}

func search(ctx context.Context, e *EvidenceEnv, a searchArgs) tool.Result {
	k := a.K
	switch {
	case k < 0:
		return tool.Errorf("k must be positive (how many passages to return, default %d)", defaultSearchK)
	case k == 0:
		k = defaultSearchK
	case k > maxSearchK:
		k = maxSearchK
	}
	hits, total, err := e.Corpus.Search(ctx, a.Query, k)
	if errors.Is(err, corpus.ErrQuery) {
		return tool.Errorf("%s", strings.TrimPrefix(err.Error(), "corpus: bad query: "))
	}
	if err != nil {
		return tool.Errorf("%v; try again, or read the corpus with list_files and read_file under %s", err, CorpusPlane)
	}
	if len(hits) == 0 {
		return tool.Result{Output: fmt.Sprintf("[no passages match %q in %s; try other words, fewer words, or list_files %s]", a.Query, CorpusPlane, CorpusPlane)}
	}
	budget := e.ObservationLimit - 512
	var b strings.Builder
	fmt.Fprintf(&b, "%s for %q (%d matching passages):\n", plural(len(hits), "hit", "hits"), a.Query, total)
	shown := 0
	for _, h := range hits {
		src := CorpusPlane + "/" + h.Path
		if b.Len()+len(src)+len(h.Title)+len(h.Text)+64 > budget && shown > 0 {
			break // an unshown hit is not registered
		}
		it, _, err := e.Q.Add(e.Agent, evidence.Item{Kind: record.EvidenceSearch, Source: src, Span: span(h.From, h.To),
			Title: h.Title, Query: a.Query, Score: h.Score, CallID: tool.CallID(ctx)}, h.Text)
		if err != nil {
			return tool.Errorf("%v", err)
		}
		entry := fmt.Sprintf("\n[%s] %s lines %d-%d · score %.3f · %q\n%s\n", it.ID, src, h.From, h.To, h.Score, h.Title, h.Text)
		b.WriteString(entry)
		shown++
	}
	if shown < len(hits) {
		fmt.Fprintf(&b, "\n[%d more hits left out at the output limit; ask for a smaller k or a narrower query]", len(hits)-shown)
	}
	b.WriteString("\n[cite a passage as [E<n>] and quote it exactly; fetch {\"ref\": \"E<n>\"} or a path reads the whole document]")
	return tool.Result{Output: b.String()}
}

func span(from, to int) record.Span { return record.Span{From: from, To: to} }
