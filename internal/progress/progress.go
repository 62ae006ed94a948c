// Package progress prints a live run's progress for people, one short line
// per step, driven by the run's record (record.Follow): what it prints is
// exactly what the record holds, in the record's order, whether the run is
// in this process or another.
//
// Per step: the elapsed time since the run started and the tokens used so
// far, the agent and turn, the first line of the model's text, the tool with
// short arguments and the result's short status; retries with their wait and
// reason; user messages and controls as they arrive; the end. Colour only
// when asked (Style), which callers do only on a terminal without NO_COLOR.
// Every text taken from the record (the model's words, a command's output,
// file names, arguments) is cleaned for a terminal (termtext.Clean) before
// it is printed: only the Style's own colour codes reach w raw.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// Options shape the lines.
type Options struct {
	// Verbose adds tool calls as they start, observations, board changes,
	// leases, the contract and the delivery's rows.
	Verbose bool
	Style   transcript.Style
}

// Printer turns events into progress lines. Not safe for concurrent use.
type Printer struct {
	w      io.Writer
	opt    Options
	start  time.Time
	tokens int
	at     time.Time         // the event being printed
	calls  map[string]string // call id -> short arguments
}

// New returns a printer writing to w.
func New(w io.Writer, opt Options) *Printer {
	return &Printer{w: w, opt: opt, calls: map[string]string{}}
}

// Follow prints the events of the run in dir after seq after, as they
// land, until the run finishes or ctx ends.
func Follow(ctx context.Context, dir string, after int64, w io.Writer, opt Options) error {
	p := New(w, opt)
	for e, err := range record.Follow(ctx, dir, 0) {
		if err != nil {
			return err
		}
		if e.Seq <= after { // still counts: the start time and the tokens so far
			p.note(e)
			continue
		}
		p.Event(e)
	}
	return nil
}

// note takes in what an event adds to the running totals.
func (p *Printer) note(e record.Event) {
	switch e.Type {
	case record.TypeRunStarted:
		if p.start.IsZero() {
			p.start = e.Time
		}
	case record.TypeModelResponse:
		var r record.ModelResponse
		if e.Decode(&r) == nil {
			p.tokens += r.Usage.TotalTokens
		}
	}
}

// Event prints what one event says, if it says anything worth a line.
func (p *Printer) Event(e record.Event) {
	p.note(e)
	p.at = e.Time
	s := p.opt.Style
	for _, x := range transcript.Entries(e, transcript.Options{}) {
		x = x.ForTerminal() // model text, command output and file names reach a terminal
		who := x.Agent
		if x.Turn > 0 {
			who += fmt.Sprintf(" t%d", x.Turn)
		}
		who = s.Paint(transcript.Cyan, who)
		switch x.Kind {
		case transcript.KindRunStarted:
			p.line("%s %s", s.Paint(transcript.Bold, "apodex:"), x.Detail)
		case transcript.KindAssistant:
			if t := transcript.FirstLine(x.Text, 120); t != "" {
				p.line("%s %s", who, t)
			}
		case transcript.KindToolCall:
			args := termtext.Clean(transcript.Args(x.Tool, x.Args, false, 80))
			p.calls[x.CallID] = transcript.FirstLine(args, 80)
			if p.opt.Verbose {
				p.line("%s %s %s …", who, s.Paint(transcript.Bold, x.Tool), p.calls[x.CallID])
			}
		case transcript.KindToolResult:
			mark := s.Paint(transcript.Green, "ok")
			if x.Error {
				mark = s.Paint(transcript.Red, "ERR")
			}
			status := transcript.FirstLine(x.Output, 80)
			p.line("%s %s %s → %s %s", who, s.Paint(transcript.Bold, x.Tool), p.calls[x.CallID], mark, status)
			delete(p.calls, x.CallID)
		case transcript.KindRetry:
			p.line("%s %s %s", who, s.Paint(transcript.Yellow, "retry:"), x.Detail)
		case transcript.KindModelError:
			p.line("%s %s %s", who, s.Paint(transcript.Red, "model error:"), x.Detail)
		case transcript.KindUser:
			p.line("%s (%s, %s): %s", s.Paint(transcript.Yellow, "user message"), x.Class, x.Detail, transcript.FirstLine(x.Text, 100))
		case transcript.KindControl:
			p.line("%s %s", s.Paint(transcript.Yellow, "control:"), x.Detail)
		case transcript.KindWarning:
			p.line("%s %s", s.Paint(transcript.Red, "WARNING:"), x.Detail)
		case transcript.KindCompaction, transcript.KindAssignment, transcript.KindVerdict, transcript.KindResumed, transcript.KindPartial:
			p.line("%s %s %s", who, s.Paint(transcript.Dim, strings.ReplaceAll(x.Kind, "_", " ")+":"), oneLine(x.Detail+" "+transcript.FirstLine(x.Text, 80)))
		case transcript.KindDelivery:
			p.line("%s %s", s.Paint(transcript.Bold, "delivery:"), x.Detail)
			if p.opt.Verbose {
				for _, l := range x.Lines {
					p.line("  %s", l)
				}
			}
		case transcript.KindRunFinished:
			code := transcript.Green
			if x.Error {
				code = transcript.Red
			}
			p.line("%s %s", s.Paint(code, "finished:"), x.Detail)
		default:
			if p.opt.Verbose {
				p.line("%s %s %s", who, s.Paint(transcript.Dim, strings.ReplaceAll(x.Kind, "_", " ")+":"), oneLine(x.Detail+" "+transcript.FirstLine(x.Text, 80)))
			}
		}
	}
}

// line prints one line, prefixed with the time since the run started (as
// the record says) and the tokens so far.
func (p *Printer) line(format string, args ...any) {
	head := "[" + elapsed(p.start, p.at) + " " + tokens(p.tokens) + "]"
	msg := strings.TrimLeft(fmt.Sprintf(format, args...), " ") // no agent: no gap
	fmt.Fprintf(p.w, "%s %s\n", p.opt.Style.Paint(transcript.Dim, head), msg)
}

func elapsed(start, now time.Time) string {
	if start.IsZero() {
		return "0s"
	}
	d := now.Sub(start)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

func tokens(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM tok", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk tok", float64(n)/1e3)
	default:
		return fmt.Sprintf("%d tok", n)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Colour reports whether w (or the writer under a termtext.Writer) gets
// colour: a terminal, and NO_COLOR unset.
func Colour(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := termtext.Raw(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
