package grade

import (
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/transcript"
)

// withheld are the entry kinds graders never see: they tell the outcome.
var withheld = map[string]bool{
	transcript.KindVerification: true,
	transcript.KindVerdict:      true,
	transcript.KindDelivery:     true,
	transcript.KindRunFinished:  true,
	transcript.KindPartial:      true,
}

// View is the visible execution log: the text graders read and the seqs
// they may cite.
type View struct {
	Text    string
	Visible map[int64]bool
}

// NewView renders events for graders, each line led by its seq. It leaves
// out the verifier (its agent, its verdicts, what the verify tool
// returned), the delivery reconciliation, the termination and the
// runtime's own model calls; reasoning is never in the transcript.
func NewView(events []record.Event) View {
	v := View{Visible: map[int64]bool{}}
	var b strings.Builder
	for _, e := range events {
		if record.RuntimeVerifier(e.Agent) {
			continue
		}
		p, _ := record.DecodePayload(e) // nil when it does not decode
		if mr, ok := p.(*record.ModelResponse); ok && mr.Purpose != "" {
			continue
		}
		for _, x := range transcript.EntriesOf(e, p, transcript.Options{}) {
			if withheld[x.Kind] {
				continue
			}
			if x.Kind == transcript.KindLease && strings.Contains(x.Detail, "released") {
				continue // its reason is the run's termination
			}
			if x.Kind == transcript.KindRunStarted {
				x.Detail = "" // names the model and sandbox, not the work
			}
			if x.Kind == transcript.KindToolResult && x.Tool == "verify" {
				x.Output = "[withheld: the verifier's answer]"
			}
			line := render(x)
			if line == "" {
				continue
			}
			v.Visible[x.Seq] = true
			fmt.Fprintf(&b, "[seq %d] %s\n", x.Seq, line)
		}
	}
	v.Text = b.String()
	return v
}

func render(x transcript.Entry) string {
	who := x.Agent
	if who == "" {
		who = "runtime"
	}
	var parts []string
	switch x.Kind {
	case transcript.KindToolCall:
		parts = append(parts, fmt.Sprintf("%s calls %s(%s)", who, x.Tool, clip(x.Args, 2000)))
	case transcript.KindToolResult:
		status := "result"
		if x.Error {
			status = "ERROR"
		}
		parts = append(parts, fmt.Sprintf("%s %s of %s: %s", who, status, x.Tool, clip(x.Output, 2000)))
	default:
		parts = append(parts, fmt.Sprintf("%s %s:", who, x.Kind))
		if x.Text != "" {
			parts = append(parts, clip(x.Text, 2000))
		}
		if x.Detail != "" && x.Kind != transcript.KindAssistant {
			parts = append(parts, "("+x.Detail+")")
		}
		parts = append(parts, x.Lines...)
	}
	return strings.Join(parts, " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + fmt.Sprintf("… [%d more bytes]", len(s)-n)
}
