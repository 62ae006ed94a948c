package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

const (
	defaultReadLimit = 2000    // lines
	maxLineLen       = 2000    // bytes of one line shown by read_file
	maxEditSize      = 1 << 26 // 64 MiB
)

type readFileArgs struct {
	Path   string `json:"path" desc:"The file, under /inputs, /workspace or /outputs; a relative path is taken from /workspace."`
	Offset int    `json:"offset,omitempty" desc:"First line to show, 1-based (default 1)."`
	Limit  int    `json:"limit,omitempty" desc:"How many lines to show (default 2000)."`
}

func readFileTool(env Env) tool.Tool {
	return tool.Define("read_file",
		"Read a text file as numbered lines (line number, tab, text). Shows up to 2000 lines from offset; the last line says how many lines the file has and which offset to read next. Very long lines are cut. Paths "+pathDesc,
		env.ObservationLimit,
		func(ctx context.Context, a readFileArgs) tool.Result {
			var shown shownSpans
			return shown.footer(ctx, env, readFile(env, a, &shown))
		})
}

func readFile(env Env, a readFileArgs, ev *shownSpans) tool.Result {
	if a.Offset < 0 || a.Limit < 0 {
		return tool.Errorf("offset and limit must be positive (offset is the 1-based first line)")
	}
	offset, limit := max(a.Offset, 1), a.Limit
	if limit == 0 {
		limit = defaultReadLimit
	}
	p, err := env.FS.Resolve(a.Path)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	f, err := env.FS.Open(p)
	if err != nil {
		return fileError(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fileError(p, err)
	case fi.IsDir():
		return tool.Errorf("%s is a directory; use list_files to see its entries", p.PlanePath)
	case !fi.Mode().IsRegular():
		return tool.Errorf("%s is not a regular file (%s) and cannot be read", p.PlanePath, fi.Mode().Type())
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); isBinary(head) {
		return tool.Errorf("%s is a binary file (%s); read_file shows text only: inspect it with bash (file, xxd | head, python)", p.PlanePath, humanSize(fi.Size()))
	}
	// Stop showing lines a little before the observation limit, so the
	// footer is never cut away.
	budget := env.ObservationLimit - 256
	var b, shown strings.Builder
	total, last, longCut, full := 0, 0, 0, false
	for {
		line, n, err := readLine(br, maxLineLen)
		if err == io.EOF {
			break
		}
		if err != nil {
			return tool.Errorf("reading %s: %v", p.PlanePath, err)
		}
		total++
		if total < offset || total >= offset+limit || full {
			continue
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if n > len(line) {
			text = clip(text, len(text)-1) + fmt.Sprintf(" [line cut: %d bytes]", n)
			longCut++
		}
		entry := fmt.Sprintf("%6d\t%s\n", total, text)
		if b.Len()+len(entry) > budget && b.Len() > 0 {
			full = true
			continue
		}
		b.WriteString(entry)
		if last > 0 {
			shown.WriteByte('\n')
		}
		shown.WriteString(strings.ToValidUTF8(string(line), "\uFFFD"))
		last = total
	}
	switch {
	case total == 0:
		return tool.Result{Output: fmt.Sprintf("[%s is empty]", p.PlanePath)}
	case offset > total:
		return tool.Errorf("offset %d is past the end of %s, which has %s", offset, p.PlanePath, plural(total, "line", "lines"))
	}
	fmt.Fprintf(&b, "[%s: lines %d-%d of %d", p.PlanePath, offset, last, total)
	if full {
		b.WriteString("; output limit reached")
	}
	if last < total {
		fmt.Fprintf(&b, "; to read more, call read_file with offset=%d", last+1)
	}
	if longCut > 0 {
		fmt.Fprintf(&b, "; %s cut at %d bytes", plural(longCut, "long line", "long lines"), maxLineLen)
	}
	b.WriteString("]")
	ev.add(p.PlanePath, offset, last, shown.String())
	return tool.Result{Output: b.String()}
}

type writeFileArgs struct {
	Path    string `json:"path" desc:"The file to create or replace; a relative path is taken from /workspace."`
	Content string `json:"content" desc:"The complete new content of the file."`
}

func writeFileTool(env Env) tool.Tool {
	planes := "/inputs and /outputs are read-only; write under /workspace."
	if env.publishing() {
		planes = "/inputs is read-only; under /outputs you may write only the paths you declared with claim_outputs, and anything under /outputs/scratch/ (shared intermediate space, never delivered)."
	}
	return tool.Define("write_file",
		"Create a file or replace its whole content; parent directories are created. "+planes+" To change part of an existing file, use edit_file.",
		env.ObservationLimit,
		func(ctx context.Context, a writeFileArgs) tool.Result { return writeFile(env, a) })
}

func writeFile(env Env, a writeFileArgs) tool.Result {
	p, err := env.FS.ResolveWrite(a.Path)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	before, _, err := env.FS.Hash(p) // through os.Root, never a swapped-in link (W6)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fileError(p, err)
	}
	if err := env.FS.WriteFile(p, []byte(a.Content)); err != nil {
		return tool.Errorf("%v", err)
	}
	after := workspace.HashBytes([]byte(a.Content))
	lines := lineCount(a.Content)
	verb := "replaced"
	switch {
	case before == "":
		verb = "created"
	case before == after:
		return tool.Result{Output: fmt.Sprintf("wrote %s: content unchanged (%s)", p.PlanePath, humanSize(int64(len(a.Content))))}
	}
	return tool.Result{
		Output: fmt.Sprintf("%s %s (%s, %s)", verb, p.PlanePath, humanSize(int64(len(a.Content))), plural(lines, "line", "lines")),
		Deltas: []tool.FileDelta{{Path: p.PlanePath, Before: before, After: after, Bytes: int64(len(a.Content))}},
	}
}

type editFileArgs struct {
	Path    string `json:"path" desc:"The file to edit; a relative path is taken from /workspace."`
	OldText string `json:"old_text" desc:"The exact text to replace, including whitespace and indentation; it must occur exactly once in the file."`
	NewText string `json:"new_text" desc:"The text to put in its place (may be empty to delete)."`
}

func editFileTool(env Env) tool.Tool {
	return tool.Define("edit_file",
		"Replace one exact occurrence of old_text with new_text in a file. old_text must match the file exactly once, whitespace and indentation included; if it occurs more than once, add surrounding lines to make it unique. To create a file or rewrite it whole, use write_file.",
		env.ObservationLimit,
		func(ctx context.Context, a editFileArgs) tool.Result { return editFile(env, a) })
}

func editFile(env Env, a editFileArgs) tool.Result {
	if a.OldText == "" {
		return tool.Errorf("old_text is empty; give the exact text to replace (to create or overwrite a file, use write_file)")
	}
	if a.OldText == a.NewText {
		return tool.Errorf("old_text and new_text are the same; nothing to change")
	}
	p, err := env.FS.ResolveWrite(a.Path)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	f, err := env.FS.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return tool.Errorf("no such file: %s; use write_file to create it", p.PlanePath)
		}
		return fileError(p, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditSize+1))
	f.Close()
	switch {
	case err != nil:
		return fileError(p, err)
	case len(data) > maxEditSize:
		return tool.Errorf("%s is larger than %s; edit it with bash (sed, python) instead", p.PlanePath, humanSize(maxEditSize))
	case isBinary(data[:min(len(data), sniffLen)]):
		return tool.Errorf("%s is a binary file; edit_file changes text only", p.PlanePath)
	}
	content := string(data)
	switch n := strings.Count(content, a.OldText); n {
	case 0:
		return tool.Errorf("old_text was not found in %s; nothing was changed. %sCopy the exact text from read_file (without the line-number prefix).", p.PlanePath, nearMiss(content, a.OldText))
	case 1:
	default:
		return tool.Errorf("old_text occurs %d times in %s (lines %s); nothing was changed. Include more surrounding lines so it matches exactly once.", n, p.PlanePath, occurrenceLines(content, a.OldText, 10))
	}
	i := strings.Index(content, a.OldText)
	line := 1 + strings.Count(content[:i], "\n")
	updated := content[:i] + a.NewText + content[i+len(a.OldText):]
	if err := env.FS.WriteFile(p, []byte(updated)); err != nil {
		return tool.Errorf("%v", err)
	}
	return tool.Result{
		Output: fmt.Sprintf("edited %s at line %d: replaced %s with %s", p.PlanePath, line,
			plural(lineCount(a.OldText), "line", "lines"), plural(lineCount(a.NewText), "line", "lines")),
		Deltas: []tool.FileDelta{{Path: p.PlanePath, Before: workspace.HashBytes(data), After: workspace.HashBytes([]byte(updated)), Bytes: int64(len(updated))}},
	}
}

// nearMiss says where old_text would match if whitespace were ignored at the
// ends of its lines, which is the usual way a copy goes wrong.
func nearMiss(content, old string) string {
	norm := func(s string) string {
		lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSpace(l)
		}
		return strings.Join(lines, "\n")
	}
	want := strings.TrimSpace(norm(old))
	if want == "" {
		return ""
	}
	have := norm(content)
	if i := strings.Index(have, want); i >= 0 {
		line := 1 + strings.Count(have[:i], "\n")
		return fmt.Sprintf("It matches near line %d if whitespace is ignored: the indentation or line endings differ. ", line)
	}
	return ""
}

// occurrenceLines lists the line numbers of the first max occurrences.
func occurrenceLines(content, old string, max int) string {
	var lines []string
	from := 0
	for len(lines) < max {
		i := strings.Index(content[from:], old)
		if i < 0 {
			break
		}
		lines = append(lines, fmt.Sprint(1+strings.Count(content[:from+i], "\n")))
		from += i + len(old)
	}
	return strings.Join(lines, ", ")
}

// lineCount is how many lines s holds: a final newline ends the last line
// rather than starting another ("a\n" is one line, "" none).
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
