package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/corpus"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/fetch"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// EvidenceHook registers what read_file and grep showed as evidence (SPEC
// R-SEARCH-2); Env.Evidence nil registers nothing.
type EvidenceHook interface {
	// File registers lines from..to of a plane file, with the exact text
	// of those lines, and returns its id and the footer that names it, or
	// "" when the file is not evidence (the agent's own writes).
	File(ctx context.Context, planePath string, from, to int, text string) (id, footer string)
}

// EvidenceEnv is what search and fetch act on, for one agent.
type EvidenceEnv struct {
	Q     *evidence.Registry
	Agent string
	// Corpus is the run's index (nil: no corpus); CorpusDir is the host
	// directory seen at /inputs/corpus.
	Corpus    *corpus.Index
	CorpusDir string
	// Network lets fetch reach http(s) URLs through Guard. Recorded, in a
	// replay, is the original run's Q: URLs are served from it only, never
	// from the network.
	Network  bool
	Guard    fetch.Guard
	Recorded *evidence.Registry
	// Producers tells which /workspace files commands produced; nil: none
	// are evidence.
	Producers        *evidence.Producers
	ObservationLimit int
	// pages keeps fetched URL texts for paging within this process.
	pages *pageCache
}

// CorpusPlane is where the corpus is seen.
const CorpusPlane = "/inputs/corpus"

var _ EvidenceHook = (*EvidenceEnv)(nil)

// File registers a read of an input, or of a /workspace file a command
// produced.
func (e *EvidenceEnv) File(ctx context.Context, planePath string, from, to int, text string) (string, string) {
	switch {
	case e == nil || e.Q == nil:
		return "", ""
	case strings.HasPrefix(planePath, "/inputs/"):
	case strings.HasPrefix(planePath, "/workspace/") && e.Producers != nil && e.Producers.ByCommand(planePath):
	default:
		return "", ""
	}
	it, _, err := e.Q.Add(e.Agent, evidence.Item{Kind: record.EvidenceFile, Source: planePath, Span: span(from, to), CallID: tool.CallID(ctx)}, text)
	if err != nil {
		return "", "[evidence not registered: " + err.Error() + "]"
	}
	return it.ID, evidence.Footer(it)
}

// EvidenceTools returns search (when there is a corpus) and fetch (when
// there is a corpus or the network: without either it could only page
// what read_file already reads).
func EvidenceTools(e *EvidenceEnv) []tool.Tool {
	if e.ObservationLimit <= 0 {
		e.ObservationLimit = tool.DefaultObservationLimit
	}
	if e.pages == nil {
		e.pages = &pageCache{m: map[string]string{}}
	}
	var out []tool.Tool
	if e.Corpus != nil {
		out = append(out, searchTool(e))
	}
	if e.Corpus != nil || e.Network {
		out = append(out, fetchTool(e))
	}
	return out
}

// maxEvidenceFiles bounds how many files one grep registers.
const maxEvidenceFiles = 20

// shownSpans collects what read_file or grep showed, file by file.
type shownSpans struct {
	spans []shownSpan
}

type shownSpan struct {
	path     string
	from, to int
	text     string
}

func (s *shownSpans) add(planePath string, from, to int, text string) {
	if s != nil && from > 0 && to >= from {
		s.spans = append(s.spans, shownSpan{planePath, from, to, text})
	}
}

// maxEvidenceRuns bounds how many runs of matching lines one grep
// registers.
const maxEvidenceRuns = 50

// matchRun is a run of adjacent matching lines of one file (grep): lines
// from..to, all of them, and the hits that show them.
type matchRun struct {
	path     string
	from, to int
	lines    []string
	hits     []int // indexes of the grep's hits
}

// registerRuns registers each run as one evidence item, whose line range
// holds exactly the lines it names, and marks each of its hits with the
// id, so the observation carries the id next to the line it names.
func registerRuns(ctx context.Context, env Env, runs []matchRun, hits []string) (string, int) {
	if env.Evidence == nil {
		return "", 0
	}
	n, note := 0, ""
	for _, r := range runs {
		if n == maxEvidenceRuns {
			note = fmt.Sprintf("[evidence: only the first %d runs of matching lines registered; grep a narrower pattern or path to register the rest]", maxEvidenceRuns)
			break
		}
		id, footer := env.Evidence.File(ctx, r.path, r.from, r.to, strings.Join(r.lines, "\n"))
		switch {
		case id != "":
			for _, i := range r.hits {
				hits[i] += "  [" + id + "]"
			}
			n++
		case footer != "" && note == "":
			note = footer // registration failed: say why once
		}
	}
	return note, n
}

// footer registers the spans with env.Evidence and appends their footers.
func (s *shownSpans) footer(ctx context.Context, env Env, r tool.Result) tool.Result {
	if env.Evidence == nil || r.IsError || len(s.spans) == 0 {
		return r
	}
	var notes []string
	n := 0
	for _, sp := range s.spans {
		if n == maxEvidenceFiles {
			notes = append(notes, fmt.Sprintf("[evidence: only the first %d files registered; grep a narrower path to register the rest]", maxEvidenceFiles))
			break
		}
		if _, f := env.Evidence.File(ctx, sp.path, sp.from, sp.to, sp.text); f != "" {
			notes = append(notes, f)
			n++
		}
	}
	if len(notes) > 0 {
		r.Output += "\n" + strings.Join(notes, "\n")
	}
	return r
}
