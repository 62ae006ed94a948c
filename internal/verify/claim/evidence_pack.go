package claim

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/evidence"
)

// packEvidence expands refs into the verifier's evidence section within
// budget bytes. Nothing is dropped silently: a directory is listed (its
// files are refs the verifier can read), a missing file is named, a file
// or text over the budget is cut at a line with where the rest is; cuts
// says each of these, for the verifier and for the caller.
func (c *Checker) packEvidence(refs []string, budget int) (string, []string) {
	var b strings.Builder
	var cuts []string
	for _, raw := range refs {
		ref := strings.TrimSpace(raw)
		left := budget - b.Len()
		var text string
		switch {
		case evidence.IsID(ref), strings.HasPrefix(ref, commandPrefix):
			text = c.ExpandRef(ref)
			if len(text) > left {
				cuts = append(cuts, fmt.Sprintf("%s: %d of %d bytes given (over the verifier's context budget of %d bytes)", ref, max(left, 0), len(text), budget))
				text = ClipLine(text, left)
			}
		case strings.HasPrefix(ref, "/"):
			var cut string
			text, cut = c.fileEvidence(ref, left)
			if cut != "" {
				cuts = append(cuts, cut)
			}
		default:
			text = ref
		}
		fmt.Fprintf(&b, "### %s\n%s\n\n", ref, text)
	}
	return b.String(), cuts
}

// fileEvidence is a file ref's text within left bytes, and what was cut.
func (c *Checker) fileEvidence(ref string, left int) (string, string) {
	p, err := c.cfg.FS.Resolve(ref)
	if err != nil {
		return "(cannot read: " + err.Error() + ")", ref + ": cannot be read (" + err.Error() + ")"
	}
	st, err := os.Stat(p.Host)
	switch {
	case os.IsNotExist(err):
		return "(missing: no such file)", ref + ": missing (no such file or directory); nothing of it was given"
	case err != nil:
		return "(cannot read: " + err.Error() + ")", ref + ": cannot be read"
	case st.IsDir():
		ents, _ := os.ReadDir(p.Host)
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			n := strings.TrimSuffix(p.PlanePath, "/") + "/" + e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		sort.Strings(names)
		return "(a directory; its entries, each readable with read_file or list_files)\n" + strings.Join(names, "\n"),
			fmt.Sprintf("%s: a directory; its %d entries were listed, not their contents (read them with read_file)", ref, len(names))
	}
	f, err := c.cfg.FS.Open(p)
	if err != nil {
		return "(cannot read: " + err.Error() + ")", ref + ": cannot be read"
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, int64(max(left, 0))+1))
	if int64(len(data)) <= int64(left) && int64(len(data)) == st.Size() {
		return string(data), ""
	}
	text := ClipLine(string(data), left)
	lines := strings.Count(text, "\n")
	return text, fmt.Sprintf("%s: the first %d of %d bytes (%d lines) given; read the rest with read_file %s from line %d", ref, len(text), st.Size(), lines, p.PlanePath, lines+1)
}

// ClipLine cuts s to at most n bytes, at the end of a line when one fits.
func ClipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return s
}
