package corpus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
)

// States of an opened index.
const (
	Built  = "built"
	Reused = "reused"
)

// ErrQuery: the query cannot be searched; the message says how to fix it.
var ErrQuery = errors.New("corpus: bad query")

// Index is an opened corpus index. Safe for concurrent searches.
type Index struct {
	idx  bleve.Index
	Info Info
}

// Info is how the index was obtained.
type Info struct {
	Hash     string
	State    string // Built or Reused
	Path     string
	Docs     int
	Passages int
	Skipped  []string
	Elapsed  time.Duration
}

// Hit is one passage a search found.
type Hit struct {
	Path     string // relative to the corpus
	Title    string
	From, To int
	Score    float64
	Text     string
}

// readyFile marks a complete index directory.
const readyFile = "apodex-ready"

// Open opens the cached index of the corpus in dir under cache (built and
// cached there first when missing).
func Open(ctx context.Context, dir, cache string) (*Index, error) {
	start := time.Now()
	m, err := Scan(dir)
	if err != nil {
		return nil, err
	}
	hex := strings.TrimPrefix(m.Hash, "sha256:")
	final := filepath.Join(cache, hex)
	info := Info{Hash: m.Hash, Path: final, Skipped: m.Skipped, State: Reused}
	if _, err := os.Stat(filepath.Join(final, readyFile)); err != nil {
		info.State = Built
		if err := build(ctx, m, cache, final); err != nil {
			return nil, err
		}
	}
	idx, err := bleve.OpenUsing(final, map[string]any{"read_only": true})
	if err != nil {
		return nil, fmt.Errorf("corpus: open the index %s: %w; delete that directory to rebuild it", final, err)
	}
	if data, err := os.ReadFile(filepath.Join(final, readyFile)); err == nil {
		fmt.Sscanf(string(data), "docs %d passages %d", &info.Docs, &info.Passages)
	}
	info.Elapsed = time.Since(start)
	return &Index{idx: idx, Info: info}, nil
}

// Close releases the index.
func (ix *Index) Close() error { return ix.idx.Close() }

func indexMapping() mapping.IndexMapping {
	text := bleve.NewTextFieldMapping()
	text.Analyzer = en.AnalyzerName
	text.Store = true
	text.IncludeTermVectors = true
	title := bleve.NewTextFieldMapping()
	title.Analyzer = en.AnalyzerName
	title.Store = true
	pathF := bleve.NewTextFieldMapping() // words of the path: path:report
	pathF.Store = true
	exact := bleve.NewTextFieldMapping()
	exact.Analyzer = keyword.Name
	exact.Store = true
	num := bleve.NewNumericFieldMapping()
	num.Index = false
	num.Store = true
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("text", text)
	dm.AddFieldMappingsAt("title", title)
	dm.AddFieldMappingsAt("path", pathF)
	dm.AddFieldMappingsAt("file", exact)
	dm.AddFieldMappingsAt("from", num)
	dm.AddFieldMappingsAt("to", num)
	im := bleve.NewIndexMapping()
	im.DefaultMapping = dm
	im.DefaultAnalyzer = en.AnalyzerName
	im.DefaultField = "text"
	im.ScoringModel = "bm25"
	return im
}

type passageDoc struct {
	Text  string  `json:"text"`
	Title string  `json:"title"`
	Path  string  `json:"path"`
	File  string  `json:"file"`
	From  float64 `json:"from"`
	To    float64 `json:"to"`
}

// build indexes m into a temporary directory beside final, then renames it.
func build(ctx context.Context, m Manifest, cache, final string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return fmt.Errorf("corpus: index cache %s: %w", cache, err)
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return fmt.Errorf("corpus: index cache %s: %w", cache, err)
	}
	defer os.RemoveAll(tmp)
	at := filepath.Join(tmp, "index")
	idx, err := bleve.New(at, indexMapping())
	if err != nil {
		return fmt.Errorf("corpus: create the index: %w", err)
	}
	docs, passages := 0, 0
	batch := idx.NewBatch()
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			idx.Close()
			return err
		}
		d, err := Load(m.Dir, f.Path)
		if err != nil {
			continue // it changed since the scan; the hash will differ next time
		}
		docs++
		words := strings.Join(strings.FieldsFunc(f.Path, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
		for _, p := range d.Passages() {
			id := f.Path + "#" + strconv.Itoa(p.From)
			if err := batch.Index(id, passageDoc{Text: p.Text, Title: d.Title, Path: words, File: f.Path, From: float64(p.From), To: float64(p.To)}); err != nil {
				idx.Close()
				return fmt.Errorf("corpus: index %s: %w", f.Path, err)
			}
			passages++
		}
		if batch.Size() >= 2000 {
			if err := idx.Batch(batch); err != nil {
				idx.Close()
				return fmt.Errorf("corpus: index: %w", err)
			}
			batch = idx.NewBatch()
		}
	}
	if err := idx.Batch(batch); err != nil {
		idx.Close()
		return fmt.Errorf("corpus: index: %w", err)
	}
	if err := idx.Close(); err != nil {
		return fmt.Errorf("corpus: index: %w", err)
	}
	if err := os.WriteFile(filepath.Join(at, readyFile), fmt.Appendf(nil, "docs %d passages %d\n", docs, passages), 0o644); err != nil {
		return err
	}
	if err := os.Rename(at, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, readyFile)); serr == nil {
			return nil // another run built the same index meanwhile
		}
		os.RemoveAll(final) // a half-built leftover
		if err := os.Rename(at, final); err != nil {
			return fmt.Errorf("corpus: install the index: %w", err)
		}
	}
	return nil
}

// Search returns up to k passages for q, best first (ties by path, then
// line). q is a query string: words (any may match, all count), "a
// phrase", +must, -mustnot, path:word, title:word.
func (ix *Index) Search(ctx context.Context, q string, k int) ([]Hit, int, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, 0, fmt.Errorf("%w: the query is empty; give words to look for, e.g. \"quarterly revenue\" or budget 2024", ErrQuery)
	}
	if !hasWord(q) {
		return nil, 0, fmt.Errorf("%w: %q has no words, only syntax; give words to look for, e.g. \"quarterly revenue\" or budget 2024", ErrQuery, q)
	}
	qq := query.NewQueryStringQuery(q)
	if _, err := qq.Parse(); err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %v; use plain words, \"a phrase\", +must, -not, path:word or title:word (quote special characters)", ErrQuery, q, err)
	}
	req := bleve.NewSearchRequestOptions(qq, k, 0, false)
	req.Fields = []string{"text", "title", "file", "from", "to"}
	res, err := ix.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, 0, fmt.Errorf("corpus: search: %w", err)
	}
	hits := make([]Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		hit := Hit{Score: float64(int64(h.Score*1000+0.5)) / 1000}
		hit.Text, _ = h.Fields["text"].(string)
		hit.Title, _ = h.Fields["title"].(string)
		hit.Path, _ = h.Fields["file"].(string)
		if f, ok := h.Fields["from"].(float64); ok {
			hit.From = int(f)
		}
		if t, ok := h.Fields["to"].(float64); ok {
			hit.To = int(t)
		}
		hits = append(hits, hit)
	}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.From < b.From
	})
	return hits, int(res.Total), nil
}

// hasWord reports whether q has a letter or digit outside field names.
func hasWord(q string) bool {
	for _, f := range strings.Fields(q) {
		if i := strings.Index(f, ":"); i >= 0 {
			f = f[i+1:]
		}
		if strings.IndexFunc(f, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			return true
		}
	}
	return false
}
