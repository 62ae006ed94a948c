// Package progress prints a live run's progress for people, driven by the
// run's record (record.Follow): what it prints is exactly what the record
// holds, in the record's order, whether the run is in this process or
// another.
//
// Per step: the elapsed time since the run started and the tokens used so
// far, the agent and turn, the first line of the model's text, each tool
// call when it starts (the tool with short arguments) and its result when
// it ends (its status, and for bash the last lines of the command's output;
// with Verbose all of them, capped); retries with their wait and reason;
// user messages and controls as they arrive; the end. Calls are told apart
// by agent and call id, so the lines of a team name the agent that made
// each call. While a model call is in flight the printer says so: on a
// terminal (Options.Live) as a status line redrawn in place, with the text
// the model streams (Delta) as it arrives; elsewhere as a plain line once
// a call has waited WaitAfter, and again every WaitEvery.
//
// Colour only when asked (Style), which callers do only on a terminal
// without NO_COLOR. Every text taken from the record or a stream (the
// model's words, a command's output, file names, arguments) is cleaned for
// a terminal (termtext.Clean) before it is printed: only the Style's own
// colour codes and the status line's erase sequence reach w raw.
//
// A Printer is safe for concurrent use: the follower calls Event, a ticker
// Tick, and model clients Delta, each from its own goroutine.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// Options shape the lines.
type Options struct {
	// Verbose adds observations, board changes, leases, the contract and
	// the delivery's rows, and prints a command's whole output (capped).
	Verbose bool
	Style   transcript.Style
	// Live draws a status line on a terminal: the model calls in flight,
	// how long each has waited, and the text being streamed.
	Live bool
	// Now is the clock of waiting times; nil is time.Now.
	Now func() time.Time
}

// How long a model call waits before a plain (not Live) line says so, and
// how often it says it again.
const (
	WaitAfter = 15 * time.Second
	WaitEvery = 30 * time.Second
)

// Printer turns events into progress lines.
type Printer struct {
	mu     sync.Mutex
	w      io.Writer
	opt    Options
	start  time.Time
	tokens int
	at     time.Time           // the event being printed
	calls  map[callKey]string  // the calls in flight: their short arguments
	last   callKey             // the call whose start line was printed last, if nothing came after it
	wait   map[string]*waiting // per agent, the model call in flight
	drawn  bool                // a status line is on the screen
	drewAt time.Time           // when the status line was last drawn
}

// callKey names a call: call ids are only unique within one agent.
type callKey struct{ agent, id string }

// New returns a printer writing to w.
func New(w io.Writer, opt Options) *Printer {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Printer{w: w, opt: opt, calls: map[callKey]string{}, wait: map[string]*waiting{}}
}

// note takes in what an event (p its decoded payload, nil when it does
// not decode) adds to the running totals and to the model calls in flight.
func (p *Printer) note(e record.Event, pl any) {
	switch pl := pl.(type) {
	case *record.RunStarted:
		if p.start.IsZero() {
			p.start = e.Time
		}
	case *record.ModelRequest:
		if w := p.wait[e.Agent]; w == nil || !w.streamed { // Delta may have opened it first
			p.wait[e.Agent] = &waiting{since: e.Time}
		} else {
			w.since = e.Time
		}
	case *record.ModelResponse:
		p.tokens += pl.Usage.TotalTokens
		delete(p.wait, e.Agent)
	case *record.ModelError:
		delete(p.wait, e.Agent)
	case *record.Resumed, *record.RunFinished: // the calls of a stopped process are over
		clear(p.wait)
	}
}

// Event prints what one event says, if it says anything worth a line.
func (p *Printer) Event(e record.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, _ := record.DecodePayload(e) // nil when it does not decode
	p.note(e, pl)
	p.at = e.Time
	s := p.opt.Style
	for _, x := range transcript.EntriesOf(e, pl, transcript.Options{}) {
		x = x.ForTerminal() // model text, command output and file names reach a terminal
		who := p.who(x)
		switch x.Kind {
		case transcript.KindRunStarted:
			p.line("%s %s", s.Paint(transcript.Bold, "apodex:"), x.Detail)
		case transcript.KindAssistant:
			if t := transcript.FirstLine(x.Text, 120); t != "" {
				p.line("%s %s", who, t)
			}
		case transcript.KindToolCall:
			p.callStarted(who, x)
		case transcript.KindToolResult:
			p.callEnded(who, x, pl)
		case transcript.KindInterrupted:
			k := callKey{x.Agent, x.CallID}
			p.line("%s %s %s → %s", who, s.Paint(transcript.Bold, x.Tool), transcript.FirstLine(p.calls[k], 48), s.Paint(transcript.Red, "interrupted"))
			delete(p.calls, k)
		case transcript.KindTextFinish, transcript.KindReview:
			p.line("%s %s %s", who, s.Paint(transcript.Yellow, transcript.Label(x.Kind)+":"), oneLine(x.Detail))
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
			p.line("%s %s %s", who, s.Paint(transcript.Dim, transcript.Label(x.Kind)+":"), oneLine(x.Detail+" "+transcript.FirstLine(x.Text, 80)))
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
				p.line("%s %s %s", who, s.Paint(transcript.Dim, transcript.Label(x.Kind)+":"), oneLine(x.Detail+" "+transcript.FirstLine(x.Text, 80)))
			}
		}
	}
}

// who is an entry's agent and turn, coloured.
func (p *Printer) who(x transcript.Entry) string {
	who := x.Agent
	if x.Turn > 0 {
		who += fmt.Sprintf(" t%d", x.Turn)
	}
	return p.opt.Style.Paint(transcript.Cyan, who)
}

// line prints one line, prefixed with the time since the run started (as
// the record says) and the tokens so far. The caller holds p.mu.
func (p *Printer) line(format string, args ...any) {
	head := "[" + elapsed(p.start, p.at) + " " + tokens(p.tokens) + "]"
	msg := strings.Trim(fmt.Sprintf(format, args...), " ") // no agent, no arguments: no gap
	p.clearStatus()
	fmt.Fprintf(p.w, "%s %s\n", p.opt.Style.Paint(transcript.Dim, head), msg)
	p.last = callKey{}
	if p.opt.Live {
		p.drawStatus(p.opt.Now())
	}
}

// more prints a line that belongs to the line before it (a command's
// output), indented under it. The caller holds p.mu.
func (p *Printer) more(text string) {
	p.clearStatus()
	fmt.Fprintf(p.w, "    %s %s\n", p.opt.Style.Paint(transcript.Dim, "│"), text)
	if p.opt.Live {
		p.drawStatus(p.opt.Now())
	}
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
	return Terminal(w)
}

// Terminal reports whether w (or the writer under a termtext.Writer) is a
// terminal that can redraw a status line.
func Terminal(w io.Writer) bool {
	if os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := termtext.Raw(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
