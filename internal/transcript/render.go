package transcript

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/termtext"
)

// Clipping of the text form (without Full).
const (
	clipLines = 12
	clipBytes = 1600
	clipArgs  = 400
)

// Style colours text for a terminal; the zero Style writes plain text.
type Style struct{ Color bool }

// ANSI SGR codes used.
const (
	Bold   = "1"
	Dim    = "2"
	Red    = "31"
	Green  = "32"
	Yellow = "33"
	Blue   = "34"
	Cyan   = "36"
)

// Paint wraps s in the SGR code when colour is on.
func (s Style) Paint(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// Writer prints entries as a readable transcript, a header line whenever
// the agent changes.
type Writer struct {
	W     io.Writer
	Full  bool // whole outputs and arguments
	Style Style
	agent string
	begun bool
}

// Write prints one entry, its text cleaned for a terminal (ForTerminal):
// only the Style's own colour codes reach W raw.
func (w *Writer) Write(x Entry) {
	x = x.ForTerminal()
	s := w.Style
	agent := x.Agent
	if agent == "" || agent == "runtime" || agent == "user" {
		agent = "run"
	}
	if !w.begun || agent != w.agent {
		if w.begun {
			fmt.Fprintln(w.W)
		}
		fmt.Fprintln(w.W, s.Paint(Bold, "── "+agent+" "+strings.Repeat("─", max(4, 40-len(agent)))))
		w.agent, w.begun = agent, true
	}
	label := func(l, code string) string { return s.Paint(code, l) }
	switch x.Kind {
	case KindRunStarted:
		fmt.Fprintf(w.W, "%s %s\n", label("started", Bold), x.Detail)
		w.block("objective: ", x.Text)
	case KindContract:
		fmt.Fprintf(w.W, "%s\n", label(x.Detail, Dim))
		for _, l := range x.Lines {
			fmt.Fprintf(w.W, "  %s\n", l)
		}
	case KindAssistant:
		if x.Text != "" {
			w.block(label("assistant", Cyan)+fmt.Sprintf(" (turn %d): ", x.Turn), x.Text)
		}
	case KindToolCall:
		fmt.Fprintf(w.W, "  %s %s %s\n", label("▸", Blue), label(x.Tool, Bold), termtext.Clean(Args(x.Tool, x.Args, w.Full, clipArgs)))
	case KindToolResult:
		mark := label("ok", Green)
		if x.Error {
			mark = label("error", Red)
		}
		fmt.Fprintf(w.W, "    %s %s\n", mark, s.Paint(Dim, x.Tool))
		body := x.Output
		if !w.Full {
			body = ClipLines(body, clipLines, clipBytes)
		}
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			fmt.Fprintf(w.W, "    %s %s\n", s.Paint(Dim, "│"), l)
		}
		if x.FullBytes > 0 {
			fmt.Fprintf(w.W, "    %s\n", s.Paint(Dim, fmt.Sprintf("(the model saw %d of %d bytes; `apodex log --full` prints all)", len(x.Output), x.FullBytes)))
		}
	case KindUser:
		cls := x.Class
		if cls == "" {
			cls = "message"
		}
		w.block(label("user", Yellow)+" ("+cls+", "+x.Detail+"): ", x.Text)
		for _, l := range x.Lines {
			fmt.Fprintf(w.W, "  %s %s\n", s.Paint(Dim, "answer:"), l)
		}
	case KindObservation:
		w.block(label("runtime", Dim)+" ("+x.Class+"): ", x.Text)
	case KindInterrupted, KindRunning:
		code := Red
		if x.Kind == KindRunning {
			code = Yellow
		}
		fmt.Fprintf(w.W, "    %s %s\n", label(x.Kind, code), s.Paint(Dim, x.Tool))
		fmt.Fprintf(w.W, "    %s %s\n", s.Paint(Dim, "│"), x.Output)
	case KindRetry, KindModelError, KindWarning:
		code := Yellow
		if x.Kind == KindModelError {
			code = Red
		}
		fmt.Fprintf(w.W, "%s %s\n", label(Label(x.Kind), code), x.Detail)
	case KindTextFinish:
		code := Green
		if x.Error {
			code = Red
		}
		fmt.Fprintf(w.W, "%s (turn %d) %s\n", label(Label(x.Kind), code), x.Turn, x.Detail)
	case KindRunFinished:
		code := Green
		if x.Error {
			code = Red
		}
		fmt.Fprintf(w.W, "%s %s\n", label("finished", code), x.Detail)
		if x.Text != "" {
			w.block("summary: ", x.Text)
		}
		for _, l := range x.Lines {
			fmt.Fprintf(w.W, "  %s\n", l)
		}
	case KindDelivery:
		code := Green
		if x.Error {
			code = Red
		}
		fmt.Fprintf(w.W, "%s %s\n", label("delivery", code), x.Detail)
		for _, l := range x.Lines {
			fmt.Fprintf(w.W, "  %s\n", l)
		}
	case KindVerification:
		code := Green
		if x.Error {
			code = Red
		}
		fmt.Fprintf(w.W, "%s %s\n", label("verification", code), x.Detail)
	default:
		line := x.Detail
		if x.Text != "" {
			line += ": " + oneLine(x.Text)
		}
		code := Dim
		if x.Error {
			code = Red
		}
		fmt.Fprintf(w.W, "%s %s\n", label(Label(x.Kind), code), line)
		for _, l := range x.Lines {
			fmt.Fprintf(w.W, "  %s\n", l)
		}
	}
}

// ForTerminal is x with every text field cleaned for a terminal
// (termtext.Clean). Args stays JSON (which escapes controls): clean what
// Args renders of it.
func (x Entry) ForTerminal() Entry {
	for _, f := range []*string{&x.Agent, &x.Kind, &x.Text, &x.Tool, &x.CallID, &x.Output, &x.Class, &x.Detail} {
		*f = termtext.Clean(*f)
	}
	if len(x.Lines) > 0 {
		lines := make([]string, len(x.Lines))
		for i, l := range x.Lines {
			lines[i] = termtext.Clean(l)
		}
		x.Lines = lines
	}
	return x
}

// block prints a labelled text, its continuation lines indented.
func (w *Writer) block(label, text string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	fmt.Fprintf(w.W, "%s%s\n", label, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(w.W, "  %s\n", l)
	}
}

// Args renders a call's arguments for people: bash's command as `$ cmd`,
// other JSON objects as key=value pairs, clipped to n bytes unless full.
func Args(tool, args string, full bool, n int) string {
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		return clip(args, n, full)
	}
	if c, ok := m["command"].(string); ok && tool == "bash" && len(m) <= 2 {
		return clip("$ "+c, n, full)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var v string
		switch t := m[k].(type) {
		case string:
			v = t
			if strings.ContainsAny(t, " \n\t\"") {
				v = plainJSON(t)
			}
		default:
			v = plainJSON(t)
		}
		parts = append(parts, k+"="+v)
	}
	return clip(strings.Join(parts, " "), n, full)
}

func clip(s string, n int, full bool) string {
	if full || len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// ClipLines keeps the first lines (and bytes) of s and says what it left.
func ClipLines(s string, lines, bytes int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	out := all
	if len(all) > lines {
		out = all[:lines]
	}
	text := strings.Join(out, "\n")
	cutBytes := len(text) > bytes
	if cutBytes {
		text = clip(text, bytes, false)
	}
	if len(out) < len(all) || cutBytes {
		text += fmt.Sprintf("\n… (%d lines, %d bytes in all; --full prints them)", len(all), len(s))
	}
	return text
}

// FirstLine is the first non-empty line of s, clipped to n bytes.
func FirstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return clip(l, n, false)
		}
	}
	return ""
}

// plainJSON is v as JSON without HTML escaping: a command's > and & stay
// readable.
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
