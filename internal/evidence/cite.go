package evidence

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// Citation is one [E12] marker in a deliverable (several ids may share
// one marker: [E1, E2] or [E1][E2]), with the quotes attributed to it:
// each quote of a sentence belongs to the nearest marker after it in that
// sentence (a quote after the sentence's last marker, to that marker), so
// `"A" [E25], and "B" [E23].` gives "A" to E25 and "B" to E23.
type Citation struct {
	Line     int      // 1-based line of the marker
	IDs      []string // the ids it cites
	Sentence string   // the sentence that carries it
	Quotes   []string // the quotes attributed to it
}

// markerPattern is one [E12] or [E1, E3] marker.
var markerPattern = regexp.MustCompile(`\[(E[0-9]+(?:\s*[,;]\s*E[0-9]+)*)\]`)

// quotePattern is a span in straight or curly double quotes. It is
// compiled on first use: the bounded repetitions make it the costliest
// pattern of the binary (~4 ms and 1 MB at every process start otherwise).
var quotePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`"([^"]{1,1000})"|“([^”]{1,1000})”`)
})

// Citations finds every citation marker in text, by paragraph: a marker's
// sentence runs from the end of the previous sentence (". ", "! ", "? "
// outside quotes, or the paragraph's start) to the end of its own; a
// marker standing after its sentence's full stop belongs to that sentence.
func Citations(text string) []Citation {
	var out []Citation
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); {
		if strings.TrimSpace(lines[i]) == "" {
			i++
			continue
		}
		start := i
		var para strings.Builder
		var lineAt []int // byte offset in para where each line starts
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			lineAt = append(lineAt, para.Len())
			para.WriteString(lines[i])
			para.WriteByte('\n')
		}
		out = append(out, paragraph(para.String(), start, lineAt)...)
	}
	return out
}

func paragraph(p string, firstLine int, lineAt []int) []Citation {
	marks := markerPattern.FindAllStringSubmatchIndex(p, -1)
	if len(marks) == 0 {
		return nil
	}
	quotes := quotePattern().FindAllStringSubmatchIndex(p, -1)
	inQuote := func(at int) bool {
		for _, q := range quotes {
			if at >= q[0] && at < q[1] {
				return true
			}
		}
		return false
	}
	// Sentence boundaries: after . ! ? followed by white space, outside quotes.
	bounds := []int{0}
	for j := 0; j+1 < len(p); j++ {
		if strings.ContainsRune(".!?", rune(p[j])) && unicode.IsSpace(rune(p[j+1])) && !inQuote(j) {
			bounds = append(bounds, j+1)
		}
	}
	bounds = append(bounds, len(p))
	var out []Citation
	sentence := make([]int, len(marks)) // the start of each marker's sentence
	for i, m := range marks {
		s := sentenceOf(bounds, m[0])
		from, to := bounds[s], bounds[s+1]
		// A marker after the full stop ("… here." [E5]) cites the
		// sentence before.
		if s > 0 && strings.TrimSpace(markerPattern.ReplaceAllString(p[from:m[0]], "")) == "" {
			from, to = bounds[s-1], from
		}
		sentence[i] = from
		c := Citation{Line: firstLine + lineOf(lineAt, m[0]) + 1, Sentence: strings.TrimSpace(p[from:to])}
		for _, id := range strings.FieldsFunc(p[m[2]:m[3]], func(r rune) bool { return r == ',' || r == ';' || unicode.IsSpace(r) }) {
			c.IDs = append(c.IDs, id)
		}
		out = append(out, c)
	}
	// Each quote goes to the nearest marker after it in its sentence, or
	// to the sentence's last marker when none follows it.
	for _, q := range quotes {
		owner := -1
		for i, m := range marks {
			from := sentence[i]
			to := len(p)
			if s := sentenceOf(bounds, from); s+1 < len(bounds) {
				to = max(bounds[s+1], m[1])
			}
			if q[0] < from || q[1] > to {
				continue
			}
			owner = i
			if m[0] >= q[1] {
				break
			}
		}
		if owner >= 0 {
			out[owner].Quotes = append(out[owner].Quotes, quoteText(p, q))
		}
	}
	return out
}

func quoteText(p string, q []int) string {
	if q[2] >= 0 {
		return p[q[2]:q[3]]
	}
	return p[q[4]:q[5]]
}

// sentenceOf is the index i with bounds[i] <= at < bounds[i+1].
func sentenceOf(bounds []int, at int) int {
	for i := len(bounds) - 2; i >= 0; i-- {
		if bounds[i] <= at {
			return i
		}
	}
	return 0
}

func lineOf(lineAt []int, at int) int {
	for i := len(lineAt) - 1; i >= 0; i-- {
		if lineAt[i] <= at {
			return i
		}
	}
	return 0
}

// Normalize folds case and runs of white space, and straight/curly quote
// and dash variants, so that a quote matches its source however it was
// wrapped or capitalised.
func Normalize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '‘', '’':
			return '\''
		case '“', '”':
			return '"'
		case '–', '—':
			return '-'
		}
		return unicode.ToLower(r)
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// Problem is one failed citation.
type Problem struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	ID    string `json:"id"`
	Quote string `json:"quote,omitempty"`
	Why   string `json:"why"`
}

func (p Problem) String() string {
	if p.Quote != "" {
		return fmt.Sprintf("%s:%d: %s %q: %s", p.File, p.Line, p.ID, p.Quote, p.Why)
	}
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.ID, p.Why)
}

// Texts gives the exact text of an evidence id; ok is false for an id Q
// does not hold.
type Texts interface {
	Text(id string) (string, error)
}

// Align checks the citations of one deliverable against Q: every cited id
// exists, and every quote appears (normalized) in the text of at least one
// id of the citation it is attributed to (the nearest after it in its
// sentence). It returns the citations found
// and the problems.
func Align(file, content string, q Texts) ([]Citation, []Problem) {
	cites := Citations(content)
	var probs []Problem
	norm := map[string]string{}
	for _, c := range cites {
		var known []string
		for _, id := range c.IDs {
			t, err := q.Text(id)
			if err != nil {
				probs = append(probs, Problem{File: file, Line: c.Line, ID: id, Why: "rule \"cited ids exist\" failed: " + id + " is not in the run's evidence (Q); cite an id a search, fetch, read_file or grep returned"})
				continue
			}
			if _, ok := norm[id]; !ok {
				norm[id] = Normalize(t)
			}
			known = append(known, id)
		}
		if len(known) == 0 {
			continue
		}
		for _, quote := range c.Quotes {
			nq := Normalize(quote)
			found := false
			for _, id := range known {
				if strings.Contains(norm[id], nq) {
					found = true
					break
				}
			}
			if !found {
				ids := strings.Join(known, ", ")
				probs = append(probs, Problem{File: file, Line: c.Line, ID: strings.Join(known, ","), Quote: quote,
					Why: "rule \"a quote is in the evidence its citation names\" failed: the quote is attributed to [" + ids + "] (the nearest citation after it in its sentence) and is not in its text; quote " + ids + " exactly, or put the citation of the evidence that holds it right after the quote"})
			}
		}
	}
	return cites, probs
}
