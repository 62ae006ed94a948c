package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/corpus"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

const defaultFetchLimit = 400 // lines

type fetchArgs struct {
	Ref    string `json:"ref" desc:"What to read: an evidence id (E3: its whole document), a corpus path (/inputs/corpus/a.md or a.md), or, when the run allows the network, an http(s) URL."`
	Offset int    `json:"offset,omitempty" desc:"First line to show, 1-based (default 1)."`
	Limit  int    `json:"limit,omitempty" desc:"How many lines to show (default 400)."`
}

func fetchTool(e *EvidenceEnv) tool.Tool {
	where := "a corpus document (by evidence id or path)"
	if e.Network {
		where = "a corpus document (by evidence id or path) or a web page (http/https URL; HTML becomes its readable text)"
	}
	return tool.Define("fetch",
		"Read "+where+" as numbered lines, paged like read_file. The lines shown get their own evidence id (in the footer); cite it as [E<n>] and quote its text exactly.",
		e.ObservationLimit,
		func(ctx context.Context, a fetchArgs) tool.Result { return fetchRef(ctx, e, a) })
}

func fetchRef(ctx context.Context, e *EvidenceEnv, a fetchArgs) tool.Result {
	if a.Offset < 0 || a.Limit < 0 {
		return tool.Errorf("offset and limit must be positive (offset is the 1-based first line)")
	}
	ref := strings.TrimSpace(a.Ref)
	if ref == "" {
		return tool.Errorf("ref is empty; give an evidence id (E3), a corpus path (/inputs/corpus/a.md) or an http(s) URL")
	}
	if evidence.IsID(ref) {
		it, ok := e.Q.Get(ref)
		if !ok {
			return tool.Errorf("unknown evidence id %s: Q holds E1 to E%d; use an id a search, fetch or read_file returned", ref, e.Q.Len())
		}
		ref = it.Source
	}
	lower := strings.ToLower(ref)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return fetchURL(ctx, e, ref, a)
	}
	if strings.Contains(ref, "://") {
		return tool.Errorf("%s: only http and https URLs can be fetched", ref)
	}
	return fetchDoc(ctx, e, ref, a)
}

// fetchDoc reads a corpus document; HTML is shown as its readable text,
// with the lines the index used.
func fetchDoc(ctx context.Context, e *EvidenceEnv, ref string, a fetchArgs) tool.Result {
	if e.CorpusDir == "" {
		return tool.Errorf("this run has no corpus; fetch reads corpus documents (and URLs with --network); read other files with read_file")
	}
	rel := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(ref, CorpusPlane)), "/")
	if strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, CorpusPlane+"/") {
		return tool.Errorf("%s is not in the corpus (%s); read other files with read_file", ref, CorpusPlane)
	}
	root, err := os.OpenRoot(e.CorpusDir)
	if err != nil {
		return tool.Errorf("cannot open the corpus: %v", err)
	}
	defer root.Close()
	fi, err := root.Lstat(relName(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf("no such corpus document: %s/%s; search the corpus or list_files %s", CorpusPlane, rel, CorpusPlane)
	case err != nil:
		return tool.Errorf("cannot read %s/%s: %v", CorpusPlane, rel, errors.Unwrap(err))
	case fi.IsDir():
		return tool.Errorf("%s/%s is a directory; list_files shows its documents", CorpusPlane, rel)
	case !fi.Mode().IsRegular():
		return tool.Errorf("%s/%s is not a regular file (links are not followed)", CorpusPlane, rel)
	case fi.Size() > corpus.MaxFileBytes:
		return tool.Errorf("%s/%s is %s, more than fetch reads; page through it with read_file", CorpusPlane, rel, humanSize(fi.Size()))
	}
	data, err := root.ReadFile(rel)
	if err != nil {
		return tool.Errorf("cannot read %s/%s: %v", CorpusPlane, rel, errors.Unwrap(err))
	}
	if isBinary(data[:min(len(data), sniffLen)]) {
		return tool.Errorf("%s/%s is a binary file; fetch reads text", CorpusPlane, rel)
	}
	d := corpus.Parse(rel, data)
	note := ""
	if d.HTML {
		note = " (readable text of the HTML)"
	}
	return page(ctx, e, CorpusPlane+"/"+filepath.ToSlash(rel), note, d.Lines, a)
}

func fetchURL(ctx context.Context, e *EvidenceEnv, u string, a fetchArgs) tool.Result {
	if e.Recorded != nil {
		return replayURL(ctx, e, u, a)
	}
	if !e.Network {
		return tool.Errorf("fetching URLs needs the network, and this run has none: start the run with --network (private and loopback addresses also need --fetch-private); search and fetch the corpus instead")
	}
	text, ok := e.pages.get(u)
	note := ""
	if !ok {
		p, err := e.Guard.Get(ctx, u)
		if err != nil {
			return tool.Errorf("%s", strings.TrimPrefix(err.Error(), "fetch: "))
		}
		text = p.Text
		if p.Truncated {
			text += "\n[… the page was cut at the fetch size or time limit]"
		}
		if p.URL != u {
			note = " (redirected to " + p.URL + ")"
		}
		e.pages.put(u, text)
	}
	return page(ctx, e, u, note, strings.Split(strings.TrimSuffix(text, "\n"), "\n"), a)
}

// replayURL serves a URL from the recorded evidence: a replay never
// reaches the network.
func replayURL(ctx context.Context, e *EvidenceEnv, u string, a fetchArgs) tool.Result {
	offset := max(a.Offset, 1)
	for _, rec := range e.Recorded.Find(u) {
		if rec.Span.From == offset {
			text, err := e.Recorded.Text(rec.ID)
			if err != nil {
				return tool.Errorf("%v", err)
			}
			it, _, err := e.Q.Add(e.Agent, evidence.Item{Kind: record.EvidenceFetch, Source: u, Span: rec.Span, CallID: tool.CallID(ctx)}, text)
			if err != nil {
				return tool.Errorf("%v", err)
			}
			var b strings.Builder
			for i, line := range strings.Split(text, "\n") {
				fmt.Fprintf(&b, "%6d\t%s\n", offset+i, line)
			}
			fmt.Fprintf(&b, "[%s: lines %d-%d, served from the record]\n%s", u, it.Span.From, it.Span.To, evidence.Footer(it))
			return tool.Result{Output: b.String()}
		}
	}
	return tool.Errorf("%s at line %d is not in the recorded evidence; a replay serves URLs only from the record", u, offset)
}

// page shows lines from the offset as read_file does and registers them.
func page(ctx context.Context, e *EvidenceEnv, source, note string, lines []string, a fetchArgs) tool.Result {
	offset, limit := max(a.Offset, 1), a.Limit
	if limit == 0 {
		limit = defaultFetchLimit
	}
	total := len(lines)
	if total == 1 && lines[0] == "" {
		return tool.Result{Output: fmt.Sprintf("[%s%s has no text]", source, note)}
	}
	if offset > total {
		return tool.Errorf("offset %d is past the end of %s, which has %s", offset, source, plural(total, "line", "lines"))
	}
	budget := e.ObservationLimit - 512
	var b, text strings.Builder
	last := offset - 1
	for n := offset; n < offset+limit && n <= total; n++ {
		line := lines[n-1]
		shown := line
		if len(shown) > maxLineLen {
			shown = clip(shown, maxLineLen) + fmt.Sprintf(" [line cut: %d bytes]", len(line))
			line = clip(line, maxLineLen)
		}
		entry := fmt.Sprintf("%6d\t%s\n", n, shown)
		if b.Len()+len(entry) > budget && b.Len() > 0 {
			break
		}
		b.WriteString(entry)
		if n > offset {
			text.WriteByte('\n')
		}
		text.WriteString(line)
		last = n
	}
	it, _, err := e.Q.Add(e.Agent, evidence.Item{Kind: record.EvidenceFetch, Source: source, Span: span(offset, last), CallID: tool.CallID(ctx)}, text.String())
	if err != nil {
		return tool.Errorf("%v", err)
	}
	fmt.Fprintf(&b, "[%s%s: lines %d-%d of %d", source, note, offset, last, total)
	if last < total {
		fmt.Fprintf(&b, "; to read more, call fetch with offset=%d", last+1)
	}
	b.WriteString("]\n" + evidence.Footer(it))
	return tool.Result{Output: b.String()}
}

type pageCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *pageCache) get(u string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[u]
	return t, ok
}

func (c *pageCache) put(u, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) > 64 {
		clear(c.m)
	}
	c.m[u] = text
}
