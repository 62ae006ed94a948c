package corpus

import (
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/readable"
)

// Passage sizes: a passage ends at a blank line once it has minLines, and
// never holds more than maxLines lines or maxBytes bytes (a longer line is
// a passage of its own, its text cut at maxBytes).
const (
	minLines = 3
	maxLines = 12
	maxBytes = 2000
)

// Doc is one document as indexed: its title and the lines of its text (the
// readable text, for HTML).
type Doc struct {
	Path  string
	Title string
	Lines []string
	HTML  bool
}

// Passage is a run of lines of a document.
type Passage struct {
	From, To int // 1-based, both included
	Text     string
}

// Load reads a corpus file as a Doc.
func Load(dir, rel string) (Doc, error) {
	data, err := os.ReadFile(dir + "/" + rel)
	if err != nil {
		return Doc{}, err
	}
	return Parse(rel, data), nil
}

// Parse makes the Doc of a file's content.
func Parse(rel string, data []byte) Doc {
	d := Doc{Path: rel}
	ext := strings.ToLower(path.Ext(rel))
	text := ""
	if ext == ".html" || ext == ".htm" {
		p := readable.Text(data, nil)
		d.Title, text, d.HTML = p.Title, p.Text, true
	} else {
		if !utf8.Valid(data) {
			data = []byte(strings.ToValidUTF8(string(data), "\uFFFD"))
		}
		text = strings.ReplaceAll(string(data), "\r\n", "\n")
	}
	text = strings.TrimSuffix(text, "\n")
	d.Lines = strings.Split(text, "\n")
	if d.Title == "" {
		d.Title = title(ext, d.Lines, rel)
	}
	return d
}

// title is a Markdown document's first heading, else its file name.
func title(ext string, lines []string, rel string) string {
	if ext == ".md" || ext == ".markdown" {
		for _, l := range lines[:min(len(lines), 50)] {
			if t, ok := strings.CutPrefix(strings.TrimSpace(l), "# "); ok {
				return strings.TrimSpace(t)
			}
		}
	}
	return strings.TrimSuffix(path.Base(rel), path.Ext(rel))
}

// Passages cuts the document into passages; blank lines between passages
// belong to none.
func (d Doc) Passages() []Passage {
	var out []Passage
	from, size := 0, 0 // from is 1-based; 0: no passage open
	flush := func(to int) {
		if from > 0 {
			out = append(out, Passage{From: from, To: to, Text: clipText(strings.Join(d.Lines[from-1:to], "\n"))})
		}
		from, size = 0, 0
	}
	for i, line := range d.Lines {
		n := i + 1
		if strings.TrimSpace(line) == "" {
			if from > 0 && n-from >= minLines {
				flush(n - 1)
			}
			continue
		}
		if from > 0 && (n-from >= maxLines || size+len(line) > maxBytes) {
			flush(n - 1)
		}
		if from == 0 {
			from = n
		}
		size += len(line) + 1
	}
	if from > 0 {
		last := len(d.Lines)
		for last > from && strings.TrimSpace(d.Lines[last-1]) == "" {
			last--
		}
		flush(last)
	}
	return out
}

// Span is the exact text of lines from..to (1-based, clamped).
func (d Doc) Span(from, to int) string {
	from, to = max(from, 1), min(to, len(d.Lines))
	if from > to {
		return ""
	}
	return strings.Join(d.Lines[from-1:to], "\n")
}

// clipText cuts s to maxBytes at a rune boundary.
func clipText(s string) string {
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
