// Package evidenceplane is a run's evidence plane (R-SEARCH): its evidence
// registry Q (restored from the record on resume, served from the original
// run's record in a replay), the corpus copied to /inputs/corpus and
// indexed under <home>/index, and each agent's search and fetch tools.
//
// Guarantees:
//   - every text an agent reads through search, fetch or an MCP tool gets
//     an evidence id recorded in the run's record, and a resumed run keeps
//     the ids it had;
//   - in a replay, fetches of URLs are served from the original run's
//     evidence, never from the network;
//   - the corpus never contains the runs home, and never overwrites an
//     inputs/corpus directory the user's inputs already have.
package evidenceplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/corpus"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/fetch"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run/stage"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/workspace"
)

// corpusName is the corpus's directory under /inputs.
const corpusName = taskstore.CorpusName

// Options is what the plane is opened with: the run's Config fields of
// the same names (package run).
type Options struct {
	Clock   clock.Clock
	Network bool
	// Evidence: Corpus (the run has a corpus to index) and FetchPrivate.
	Evidence record.EvidenceSettings
	// EvidenceFrom, in a replay, is the original run's directory.
	EvidenceFrom string
	Home         string // "": <home>/runs/<id> is the run directory's
}

// CopyCorpus copies the corpus (the flag's, *corpusDir, else the
// contract's, which then becomes *corpusDir) to inputs/corpus and returns
// its entries for run_started, and whether there is a corpus.
func CopyCorpus(corpusDir *string, home string, c *contract.Contract, fs *workspace.FS) ([]record.FileEntry, bool, error) {
	if *corpusDir == "" {
		*corpusDir = c.Corpus
	}
	src := *corpusDir
	if src == "" {
		return nil, false, nil
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, true, &stage.ConfigError{Msg: fmt.Sprintf("corpus %s is not a directory: pass --corpus (or the task's corpus key) a directory of documents", src)}
	}
	if in, err := filepath.Abs(src); err == nil {
		if h, err := filepath.Abs(home); err == nil {
			in, h = stage.RealPath(in), stage.RealPath(h)
			if h == in || strings.HasPrefix(h, in+string(filepath.Separator)) {
				return nil, true, &stage.ConfigError{Msg: fmt.Sprintf("corpus %s contains the runs home %s: pass --home outside the corpus", src, home)}
			}
		}
	}
	dst := filepath.Join(fs.Inputs, corpusName)
	if _, err := os.Lstat(dst); err == nil {
		return nil, true, &stage.ConfigError{Msg: fmt.Sprintf("the inputs already have a %s/ directory, where the corpus %s would go: rename it in the inputs", corpusName, src)}
	}
	entries, err := stage.CopyInputs(src, dst)
	if err != nil {
		return nil, true, &stage.ConfigError{Msg: fmt.Sprintf("cannot copy the corpus from %s: %v", src, err)}
	}
	for i := range entries {
		entries[i].Path = "/inputs/" + corpusName + entries[i].Path[len("/inputs"):]
	}
	return entries, true, nil
}

// Plane is a run's Q, its corpus index and what fetch may reach.
type Plane struct {
	q         *evidence.Registry
	idx       *corpus.Index // nil: no corpus
	corpusDir string
	producers *evidence.Producers
	network   bool
	guard     fetch.Guard
	recorded  *evidence.Registry // a replay's source of URL pages
}

// Open opens Q (restored from the record when the run has one),
// and the corpus index, built or reused from <home>/index.
func Open(cfg Options, dir string, fs *workspace.FS, log *record.Log) (*Plane, error) {
	p := &Plane{q: evidence.New(log, cfg.Clock.Now), producers: evidence.NewProducers(log), network: cfg.Network,
		guard: fetch.Guard{AllowPrivate: cfg.Evidence.FetchPrivate}}
	if log.Seq() > 0 {
		c, err := record.Read(dir)
		if err != nil {
			return nil, err
		}
		if err := p.q.Restore(c.Events); err != nil {
			return nil, fmt.Errorf("run: restore the evidence: %w", err)
		}
	}
	if cfg.EvidenceFrom != "" {
		r, err := evidence.FromRecord(cfg.EvidenceFrom)
		if err != nil {
			return nil, fmt.Errorf("run: the recorded evidence: %w", err)
		}
		p.recorded = r
		p.q.Follow(r.All()) // each text gets its original id, whatever order a turn's calls end in
	}
	if !cfg.Evidence.Corpus {
		return p, nil
	}
	p.corpusDir = filepath.Join(fs.Inputs, corpusName)
	home := cfg.Home
	if home == "" {
		home = filepath.Dir(filepath.Dir(dir)) // <home>/runs/<id>
	}
	idx, err := corpus.Open(context.Background(), p.corpusDir, filepath.Join(home, "index"))
	if err != nil {
		return nil, &stage.ConfigError{Msg: fmt.Sprintf("cannot index the corpus: %v", err)}
	}
	p.idx = idx
	return p, nil
}

// NoteIndex records how the corpus index was obtained.
func (p *Plane) NoteIndex(log *record.Log) {
	if p.idx == nil {
		return
	}
	in := p.idx.Info
	log.Append(record.TypeCorpusIndex, "", record.CorpusIndex{Hash: in.Hash, State: in.State, Docs: in.Docs, Passages: in.Passages,
		Skipped: in.Skipped, BuildMS: in.Elapsed.Milliseconds(), IndexPath: in.Path})
}

// ForAgent is agent id's evidence hook and its search and fetch tools.
func (p *Plane) ForAgent(id string) (builtin.EvidenceHook, []tool.Tool) {
	e := &builtin.EvidenceEnv{Q: p.q, Agent: id, Corpus: p.idx, CorpusDir: p.corpusDir, Network: p.network, Guard: p.guard,
		Recorded: p.recorded, Producers: p.producers}
	return e, builtin.EvidenceTools(e)
}

func (p *Plane) Close() {
	if p != nil && p.idx != nil {
		p.idx.Close()
	}
}

// RecordedQ is the evidence of a finished run, for its verifier; nil when
// the record cannot be read (every citation then fails as unknown).
func RecordedQ(dir string) evidence.Texts {
	q, err := evidence.FromRecord(dir)
	if err != nil {
		return nil
	}
	return q
}

// Registry is Q, or nil without an evidence plane.
func (p *Plane) Registry() *evidence.Registry {
	if p == nil {
		return nil
	}
	return p.q
}

// TaskNote tells the agent about the corpus and how citations are checked;
// "" when there is neither.
func (p *Plane) TaskNote(c *contract.Contract) string {
	var b strings.Builder
	if p != nil && p.idx != nil {
		fmt.Fprintf(&b, "\n\nA corpus of %d documents is at /inputs/corpus: find passages with search, read a document with fetch. Every passage, page and input you read gets an evidence id (E1, E2, …); cite what supports a sentence with a marker like [E3] at its end, and put any words you quote from it in double quotes, exactly as the evidence has them.", p.idx.Info.Docs)
	}
	for _, cl := range c.Verify {
		if cl.Kind == contract.KindSourceAlignment {
			fmt.Fprintf(&b, "\n\nSource alignment is checked in %s: every [E<n>] marker must name an evidence id you were given, and every \"quoted\" span in the sentence that carries it must appear in that evidence", strings.Join(cl.Outputs, ", "))
			if cl.MinCitations > 0 {
				fmt.Fprintf(&b, "; at least %d citation(s) are required", cl.MinCitations)
			}
			b.WriteString(".")
		}
	}
	return b.String()
}
