package record

import "time"

// Event types of the evidence plane (SPEC R-SEARCH, R-PLANE-3 Q).
const (
	// TypeEvidence registers one evidence id in Q; its payload is Evidence.
	TypeEvidence = "evidence"
	// TypeCorpusIndex says how the run's corpus index was obtained; its
	// payload is CorpusIndex.
	TypeCorpusIndex = "corpus_index"
)

// Evidence kinds.
const (
	EvidenceSearch = "search" // a passage a search returned
	EvidenceFetch  = "fetch"  // a page of a corpus document or of a URL
	EvidenceFile   = "file"   // lines read_file or grep showed of a plane file
)

// Evidence is one entry of Q: what was retrieved, from where, when, and the
// exact text. The text is inline when short, else in the blob TextRef; its
// sha256 is SHA256 either way.
type Evidence struct {
	ID     string `json:"id"`   // E1, E2, …
	Kind   string `json:"kind"` // EvidenceSearch, EvidenceFetch or EvidenceFile
	Source string `json:"source"`
	// Span is the line range of Source the text covers (1-based, both
	// ends included); for a URL, lines of its readable text.
	Span      Span      `json:"span"`
	SHA256    string    `json:"sha256"`
	Retrieved time.Time `json:"retrieved"`
	Text      string    `json:"text,omitempty"`
	TextRef   string    `json:"text_ref,omitempty"`
	Bytes     int       `json:"bytes"`
	// Title, Query and Score describe a search hit; CallID is the call
	// that retrieved it.
	Title  string  `json:"title,omitempty"`
	Query  string  `json:"query,omitempty"`
	Score  float64 `json:"score,omitempty"`
	CallID string  `json:"call_id,omitempty"`
}

// Span is a range of lines, both ends included.
type Span struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// CorpusIndex records the corpus index a run searched.
type CorpusIndex struct {
	Hash      string   `json:"hash"`  // content hash of the corpus
	State     string   `json:"state"` // "built" or "reused"
	Docs      int      `json:"docs"`
	Passages  int      `json:"passages"`
	Skipped   []string `json:"skipped,omitempty"` // files not indexed, each with why
	BuildMS   int64    `json:"build_ms"`
	IndexPath string   `json:"index_path"`
}

func init() {
	Register(TypeEvidence, func() any { return new(Evidence) })
	Register(TypeCorpusIndex, func() any { return new(CorpusIndex) })
}
