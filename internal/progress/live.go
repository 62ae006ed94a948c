package progress

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// waiting is one agent's model call in flight.
type waiting struct {
	since    time.Time // the model_request (or the first streamed text)
	told     time.Time // when a plain line last said it waits
	text     string    // the tail of what the model has streamed so far
	streamed bool
}

// streamTail is how much streamed text is kept per call.
const streamTail = 400

// Delta takes text a model streams before its reply is whole (an
// llm.TextSink): on a terminal the status line shows it as it arrives.
// Without Live it is dropped; the reply is printed when the record has it.
func (p *Printer) Delta(c llm.Caller, text string) {
	if !p.opt.Live || text == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.wait[c.Agent]
	if w == nil { // the stream can run ahead of the record's model_request
		w = &waiting{since: p.opt.Now()}
		p.wait[c.Agent] = w
	}
	w.streamed = true
	w.text += text
	if len(w.text) > streamTail {
		w.text = w.text[len(w.text)-streamTail:]
	}
	if now := p.opt.Now(); now.Sub(p.drewAt) >= 50*time.Millisecond { // a terminal need not redraw per token
		p.drawStatus(now)
	}
}

// Tick is the clock's beat (about once a second): on a terminal the status
// line's waiting times go on; elsewhere a call that has waited WaitAfter
// gets a line saying so, and another every WaitEvery.
func (p *Printer) Tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opt.Live {
		p.drawStatus(now)
		return
	}
	for _, agent := range p.waitingAgents() {
		w := p.wait[agent]
		if now.Sub(w.since) < WaitAfter || (!w.told.IsZero() && now.Sub(w.told) < WaitEvery) {
			continue
		}
		w.told = now
		at := p.at
		p.at = now
		p.line("%s %s", p.opt.Style.Paint(transcript.Cyan, agent), p.waitText(now.Sub(w.since)))
		p.at = at
	}
}

// End clears the status line: the run is over.
func (p *Printer) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.wait)
	p.clearStatus()
}

func (p *Printer) waitingAgents() []string {
	var out []string
	for a := range p.wait {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// waitText is "waiting for the model (12 s, 3.1k tokens so far)".
func (p *Printer) waitText(d time.Duration) string {
	return fmt.Sprintf("waiting for the model (%s, %s so far)", waited(d), tokenWords(p.tokens))
}

// status is the status line: the calls in flight, and what is streaming.
func (p *Printer) status(now time.Time) string {
	agents := p.waitingAgents()
	switch len(agents) {
	case 0:
		return ""
	case 1:
		a, w := agents[0], p.wait[agents[0]]
		if w.text != "" {
			return fmt.Sprintf("%s ✎ %s (%s, %s so far)", a, lastWords(w.text), waited(now.Sub(w.since)), tokenWords(p.tokens))
		}
		return a + " " + p.waitText(now.Sub(w.since))
	}
	var parts []string
	for _, a := range agents {
		parts = append(parts, a+" "+waited(now.Sub(p.wait[a].since)))
	}
	return fmt.Sprintf("waiting for the model: %s (%s so far)", strings.Join(parts, ", "), tokenWords(p.tokens))
}

// drawStatus redraws the status line in place. The caller holds p.mu.
func (p *Printer) drawStatus(now time.Time) {
	text := p.status(now)
	if text == "" {
		p.clearStatus()
		return
	}
	text = clipRunes(oneLine(termtext.Clean(text)), width()-1) // one screen line, or \r cannot take it back
	fmt.Fprint(p.w, "\r\x1b[K"+p.opt.Style.Paint(transcript.Dim, text))
	p.drawn, p.drewAt = true, now
}

// clearStatus takes the status line off the screen. The caller holds p.mu.
func (p *Printer) clearStatus() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// lastWords is the end of streamed text, on one line.
func lastWords(s string) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > 60 {
		return "…" + string(r[len(r)-60:])
	}
	return s
}

// waited prints a wait as "12 s" or "2 min 5 s".
func waited(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s < 60 {
		return fmt.Sprintf("%d s", max(s, 0))
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

// tokenWords is "3.1k tokens".
func tokenWords(n int) string { return strings.TrimSuffix(tokens(n), " tok") + " tokens" }

// width is the terminal's width: $COLUMNS, else 100.
func width() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 20 {
		return n
	}
	return 100
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Note prints text as a line of its own among the progress lines (a
// command's own messages, such as attach's "sent M3"), cleaned for a
// terminal.
func (p *Printer) Note(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearStatus()
	fmt.Fprintln(p.w, termtext.Clean(text))
	p.last = callKey{}
	if p.opt.Live {
		p.drawStatus(p.opt.Now())
	}
}
