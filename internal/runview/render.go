package runview

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// What show's text lists at most: the last steps and the first files (the
// JSON lists all), so that its output, and its cost, stay those of a
// summary however long the run.
const (
	shownSteps = 200
	shownFiles = 200
)

// Render writes info as the text `apodex show` prints: one labelled line
// per fact, then the last steps, the agents' timeline, the delivery and
// the first files. It writes only what the record holds; empty facts print "-".
func Render(w io.Writer, info Info) {
	fmt.Fprintf(w, "run:         %s\n", info.RunID)
	fmt.Fprintf(w, "objective:   %s\n", OneLine(info.Objective))
	if info.Mode != "" {
		fmt.Fprintf(w, "mode:        %s\n", info.Mode)
	}
	fmt.Fprintf(w, "status:      %s\n", info.Status)
	if rv := info.Review; rv != nil {
		fmt.Fprintf(w, "review:      %s by %s: %s\n", rv.Decision, rv.By, rv.Note)
	} else if info.Status == StatusAwaitingReview {
		fmt.Fprintf(w, "review:      pending: apodex review %s --approve|--reject --note TEXT\n", info.RunID)
	}
	fmt.Fprintf(w, "termination: %s\n", Dash(info.Termination))
	fmt.Fprintf(w, "outputs:     %s\n", filepath.Join(info.RunDir, "outputs"))
	if info.WorkspaceBase != "" {
		fmt.Fprintf(w, "workspace:   %s (what the rollout changed; the rest is world %s's, stored: apodex workspace --to DIR %s writes the whole tree)\n",
			filepath.Join(info.RunDir, "workspace"), info.WorkspaceBase, info.RunID)
	} else {
		fmt.Fprintf(w, "workspace:   %s\n", filepath.Join(info.RunDir, "workspace"))
	}
	if info.Trainable {
		fmt.Fprintln(w, "trainable:   yes")
	} else {
		fmt.Fprintf(w, "trainable:   no — %s\n", strings.Join(info.NotTrainable, "; "))
	}
	if info.Summary != "" {
		fmt.Fprintf(w, "summary:     %s\n", OneLine(info.Summary))
	}
	if info.Partial != "" {
		fmt.Fprintf(w, "partial:     %s\n", info.Partial)
	}
	if info.Error != "" {
		fmt.Fprintf(w, "error:       %s\n", OneLine(info.Error))
	}
	for _, c := range info.Compactions {
		switch {
		case c.Stopped != "":
			fmt.Fprintf(w, "compaction:  tier %d stopped: %s\n", c.Tier, c.Stopped)
		default:
			fmt.Fprintf(w, "compaction:  tier %d, %d → %d tokens (window %d), %d evicted\n", c.Tier, c.TokensBefore, c.TokensAfter, c.Window, len(c.Evicted))
		}
	}
	fmt.Fprintf(w, "model:       %s\n", modelLine(info.Model))
	for _, r := range info.Resumes {
		m := "the model as before"
		if r.Model != nil {
			m = modelLine(*r.Model)
		}
		fmt.Fprintf(w, "resumed:     after event %d: %s (%s)\n", r.AfterSeq, m, OneLine(r.Reason))
	}
	fmt.Fprintf(w, "sandbox:     %s (network %s)\n", info.Sandbox.Kind, onOff(info.Sandbox.Network))
	if m := info.Sandbox.Mechanism; m != "" {
		fmt.Fprintf(w, "limits:      %s\n", m)
	}
	for _, m := range info.MCP {
		fmt.Fprintf(w, "mcp server:  %s\n", mcpLine(m))
	}
	reported := "reported"
	if !info.Usage.Reported {
		reported = "estimated or partly unreported"
	}
	fmt.Fprintf(w, "usage:       %d tokens (prompt %d, completion %d; %s)\n", info.Usage.TotalTokens, info.Usage.PromptTokens, info.Usage.CompletionTokens, reported)
	fmt.Fprintf(w, "steps:       %d turns, %d tool calls (%d errors), %d events\n", info.Turns, info.ToolCalls, info.ToolErrors, info.Events)
	for _, warn := range info.Warnings {
		fmt.Fprintf(w, "WARNING:     %s\n", warn)
	}
	if info.TornTail {
		fmt.Fprintln(w, "note:        the record's last line was torn (the process was killed mid-write)")
	}
	steps := info.Steps
	if n := len(steps) - shownSteps; n > 0 {
		fmt.Fprintf(w, "  … %d earlier steps (apodex log %s; show --json lists every step)\n", n, info.RunID)
		steps = steps[n:]
	}
	for _, s := range steps {
		mark := ""
		if s.IsError {
			mark = "  [error]"
		}
		fmt.Fprintf(w, "  #%-5d %s t%d %s %s%s\n", s.Seq, s.Agent, s.Turn, s.Tool, Clip(OneLine(s.Args), 70), mark)
	}
	renderAgents(w, info.Agents)
	renderDelivery(w, info)
	fmt.Fprintf(w, "files:       %d (under %s)\n", len(info.Files)+info.FilesOmitted+info.WorldFiles, info.RunDir)
	files := info.Files
	if len(files) > shownFiles {
		files = files[:shownFiles]
	}
	for _, f := range files {
		fmt.Fprintf(w, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
	}
	if n := len(info.Files) - len(files); n > 0 {
		fmt.Fprintf(w, "  … and %d more (apodex show --json %s)\n", n, info.RunID)
	}
	if info.FilesOmitted > 0 {
		fmt.Fprintf(w, "  … and %d more, not listed in the record\n", info.FilesOmitted)
	}
	if info.WorldFiles > 0 {
		fmt.Fprintf(w, "  … and %d files of world %s, unchanged (its manifest lists them)\n", info.WorldFiles, info.World)
	}
}

// modelLine is a model as show prints it: provider, name, endpoint.
func modelLine(m record.ModelSettings) string {
	return strings.TrimSpace(strings.Join([]string{m.Provider, m.Name, m.BaseURL}, " "))
}

// renderAgents prints per-agent activity, times relative to the first
// agent's start: the rows of a per-agent timeline.
func renderAgents(w io.Writer, agents []AgentActivity) {
	if len(agents) == 0 {
		return
	}
	fmt.Fprintf(w, "agents:      %d\n", len(agents))
	start := agents[0].From
	for _, a := range agents {
		if !a.From.IsZero() && (start.IsZero() || a.From.Before(start)) {
			start = a.From
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGENT\tROLE\tPARENT\tITEM\tSTATE\tTURNS\tTOOLS\tERRORS\tACTIVE\tFROM→TO")
	for _, a := range agents {
		span := "-"
		if !a.From.IsZero() {
			span = "+" + Short(a.From.Sub(start)) + "→+" + Short(a.To.Sub(start))
		}
		errs := fmt.Sprint(a.ToolErrors)
		if a.ModelErrors > 0 {
			errs += fmt.Sprintf("+%d model", a.ModelErrors)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", a.Agent, Dash(Clip(a.Role, 24)), Dash(a.Parent), Dash(a.Item), Dash(a.State),
			a.Turns, a.ToolCalls, errs, Short(time.Duration(a.ActiveMS)*time.Millisecond), span)
	}
	tw.Flush()
}

// renderDelivery prints the reconciled delivery, the verification results
// and the final gate's failures, when the record has them.
func renderDelivery(w io.Writer, info Info) {
	if d := info.Delivery; d != nil {
		verdict := "ok"
		if !d.OK {
			verdict = "FAILED: " + Dash(d.Reason)
		}
		fmt.Fprintf(w, "delivery:    %s\n", verdict)
		for _, e := range d.Entries {
			line := fmt.Sprintf("  %-10s %s  %d bytes  by %s", e.Status, e.Path, e.Bytes, Dash(e.Agent))
			if e.Reason != "" {
				line += "  " + e.Reason
				if e.Detail != "" {
					line += ": " + OneLine(e.Detail)
				}
			}
			fmt.Fprintln(w, line)
		}
		for _, p := range d.Undeclared {
			fmt.Fprintf(w, "  %-10s %s  (reported, not delivered)\n", "undeclared", p)
		}
	}
	if len(info.Verification) > 0 {
		passed := 0
		for _, v := range info.Verification {
			if v.Passed {
				passed++
			}
		}
		fmt.Fprintf(w, "verification: %d of %d passed\n", passed, len(info.Verification))
		for _, v := range info.Verification {
			line := fmt.Sprintf("  %-6s %s", passWord(v.Passed), v.Label)
			if v.Detail != "" {
				line += ": " + Clip(OneLine(v.Detail), 100)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(info.Failures) > 0 {
		fmt.Fprintf(w, "failures:    %d\n", len(info.Failures))
		for _, f := range info.Failures {
			fmt.Fprintf(w, "  - %s\n", OneLine(f))
		}
	}
}

// Dash is s, or "-" when s is empty: a table cell that is never blank.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Clip cuts s to n runes, marking the cut with an ellipsis.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// OneLine folds every run of white space in s, newlines included, to one space.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Short rounds a duration for a table: ms under a second, else tenths.
func Short(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}

// mcpLine is one MCP server of the run: "docs (stdio, ready, docs-server
// 1.2): 2 tools mcp__docs__search, mcp__docs__read".
func mcpLine(m record.MCPOffered) string {
	about := m.Transport + ", " + m.State
	if m.ServerName != "" {
		about += ", " + strings.TrimSpace(m.ServerName+" "+m.ServerVersion)
	}
	var names []string
	for _, t := range m.Tools {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return fmt.Sprintf("%s (%s): no tools", m.Server, about)
	}
	return fmt.Sprintf("%s (%s): %d tools %s", m.Server, about, len(names), Clip(strings.Join(names, ", "), 200))
}
