package progress

import (
	"fmt"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// How much of a command's output a result shows: its last lines, or with
// Verbose all of it up to a cap.
const (
	tailLines    = 4
	verboseLines = 200
	verboseBytes = 16 << 10
)

// callStarted prints a call as it starts. The caller holds p.mu.
func (p *Printer) callStarted(who string, x transcript.Entry) {
	args := transcript.FirstLine(termtext.Clean(transcript.Args(x.Tool, x.Args, false, 100)), 100)
	k := callKey{x.Agent, x.CallID}
	p.calls[k] = args
	p.line("%s %s %s", who, p.opt.Style.Paint(transcript.Bold, x.Tool), args)
	p.last = k
}

// callEnded prints a call's result: its status, and for bash the command's
// output. The call's arguments are repeated unless its start line is the
// line right above. The caller holds p.mu.
func (p *Printer) callEnded(who string, x transcript.Entry, pl any) {
	s := p.opt.Style
	k := callKey{x.Agent, x.CallID}
	args, started := p.calls[k]
	delete(p.calls, k)
	head := s.Paint(transcript.Bold, x.Tool)
	if started && p.last != k {
		head += " " + transcript.FirstLine(args, 48)
	}
	mark := s.Paint(transcript.Green, "ok")
	if x.Error {
		mark = s.Paint(transcript.Red, "ERR")
	}
	if x.Tool != "bash" {
		p.line("%s %s → %s %s", who, head, mark, transcript.FirstLine(x.Output, 80))
		return
	}
	out := parseBash(x.Output)
	if r, ok := pl.(*record.ToolResult); ok && r.Meta != nil && r.Meta.DurationMS >= 100 {
		out.status += fmt.Sprintf(" (%s)", shortDuration(time.Duration(r.Meta.DurationMS)*time.Millisecond))
	}
	p.line("%s %s → %s %s", who, head, mark, out.status)
	lines := out.lines
	switch {
	case !p.opt.Verbose && len(lines) > tailLines:
		p.more(s.Paint(transcript.Dim, fmt.Sprintf("… %d lines above", len(lines)-tailLines)))
		lines = lines[len(lines)-tailLines:]
	case p.opt.Verbose:
		n, size := 0, 0
		for n < len(lines) && n < verboseLines && size+len(lines[n]) <= verboseBytes {
			size += len(lines[n]) + 1
			n++
		}
		if n < len(lines) {
			defer p.more(s.Paint(transcript.Dim, fmt.Sprintf("… %d more lines (apodex log --full prints them)", len(lines)-n)))
			lines = lines[:n]
		}
	}
	for _, l := range lines {
		p.more(transcript.FirstLine(l, 200))
	}
}

// bashOutput is what progress shows of a bash observation.
type bashOutput struct {
	status string   // "exit 0", "exit 2, timed out after 5s"
	lines  []string // stdout's lines, then stderr's marked "stderr:", then the notes
}

// parseBash reads the observation the bash tool wrote (exit code, the
// stdout and stderr sections, notes); what it does not recognise it keeps
// as output lines.
func parseBash(obs string) bashOutput {
	var b bashOutput
	stream := ""
	for _, l := range strings.Split(strings.TrimRight(obs, "\n"), "\n") {
		switch {
		case b.status == "" && strings.HasPrefix(l, "exit code: "):
			b.status = "exit " + strings.TrimPrefix(l, "exit code: ")
		case strings.HasPrefix(l, "timed out after "):
			b.status += ", " + l
		case strings.HasPrefix(l, "--- stdout"), strings.HasPrefix(l, "--- stderr"):
			stream = strings.Fields(strings.Trim(l, "- "))[0]
			stream = strings.TrimSuffix(stream, ":")
			if strings.HasSuffix(l, ": empty ---") {
				stream = ""
			}
		case stream == "stderr":
			b.lines = append(b.lines, "stderr: "+l)
		default:
			b.lines = append(b.lines, l)
		}
	}
	if b.status == "" { // not a command's observation: an error before it ran
		if len(b.lines) > 0 {
			b.status, b.lines = b.lines[0], b.lines[1:]
		}
	}
	return b
}

// shortDuration prints d as 0.3s, 12s or 2m5s.
func shortDuration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	default:
		return d.Round(time.Second).String()
	}
}
