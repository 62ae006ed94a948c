package agent

import (
	"strings"

	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
)

// The parts of a system prompt every agent shares. They are built from the
// tools the agent is actually given, so what the prompt says an agent can
// do is what it can do.

// outputsNote is the one sentence on /outputs and the lease.
const outputsNote = "- /outputs: the delivery area. To write files there, first call claim_outputs with their exact paths: it declares them as deliverables and takes the run's publishing lease (one agent holds it at a time); only the claimed paths become writable, for the file tools and bash alike. /outputs/scratch/ is shared scratch space anyone may write without a claim; it is never delivered."

// concurrencyNote says how the calls of one reply run; ordered names the
// tools among them that apply in call order (tool.Serial).
func concurrencyNote(ordered []string, finish string) string {
	s := "The tool calls of one reply run concurrently, and their results come back in call order"
	if len(ordered) > 0 {
		s += "; " + strings.Join(ordered, ", ") + " calls are applied in call order, each after the calls before it"
	}
	if finish != "" {
		s += "; " + finish + " runs after the others"
	}
	return s + ". A call that needs another's result or effect (running a script you write in the same reply, reading a file a command creates) belongs in your next reply."
}

// PlaneNotes describes /inputs, the given /workspace line and /outputs,
// which is read-only for an agent without claim_outputs.
func PlaneNotes(tools *tool.Set, workspace string) string {
	var b strings.Builder
	b.WriteString("Paths you can use:\n")
	b.WriteString("- /inputs: the task's input files, read-only.\n")
	b.WriteString(workspace + "\n")
	if _, ok := tools.Get("claim_outputs"); ok {
		b.WriteString(outputsNote + "\n")
	} else {
		b.WriteString("- /outputs: the delivery area; read-only for you, but /outputs/scratch/ is shared scratch space you may write (never delivered).\n")
	}
	return b.String()
}

// ToolNotes says how calls run, what the sandbox offers (when bash is
// among the tools) and lists the tools, in name order.
func ToolNotes(tools *tool.Set) string {
	var b strings.Builder
	var serial []string
	for _, n := range tools.Names() {
		if t, _ := tools.Get(n); tool.IsSerial(t) {
			serial = append(serial, n)
		}
	}
	finish := ""
	for _, n := range []string{"finish", "report"} {
		if _, ok := tools.Get(n); ok {
			finish = n
		}
	}
	b.WriteString(concurrencyNote(serial, finish) + "\n")
	if _, ok := tools.Get("bash"); ok {
		b.WriteString("bash runs /bin/sh in a sandbox with these same paths and a private /tmp. " + builtin.SandboxOffer() + "\n")
	}
	b.WriteString("Tool errors are observations: read them, fix the call and continue.\n")
	b.WriteString("Your tools: " + strings.Join(tools.Names(), ", ") + ".\n")
	return b.String()
}

// SystemPrompt is a single agent's system prompt for the tools it has.
func SystemPrompt(tools *tool.Set) string {
	var b strings.Builder
	b.WriteString("You are Apodex, an agent that completes work by acting on files and running commands, not by describing what you would do.\n\n")
	b.WriteString(PlaneNotes(tools, "- /workspace: your working area, writable. Relative paths are resolved here. Put your results here."))
	b.WriteString("\n")
	b.WriteString(ToolNotes(tools))
	b.WriteString("When the objective is done, call finish with a summary of what you produced and where.\n")
	return b.String()
}
