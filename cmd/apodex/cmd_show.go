package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/state"
)

func cmdShow(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("show", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object")
	artifacts := fs.Bool("artifacts", false, "print the artifact index: each file the agents produced with its provenance chain")
	showGrade := fs.Bool("grade", false, "print the run's HDS6 grade (grade.json, from `apodex grade`)")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	if *showGrade {
		return showGradeOf(dir, *jsonOut, stdout)
	}
	if *artifacts {
		return showArtifacts(dir, *jsonOut, stdout, stderr)
	}
	info, err := loadInfo(dir)
	if err != nil {
		return err
	}
	if *jsonOut {
		writeJSON(stdout, info)
		return nil
	}
	fmt.Fprintf(stdout, "run:         %s\n", info.RunID)
	fmt.Fprintf(stdout, "objective:   %s\n", oneLine(info.Objective))
	if info.Mode != "" {
		fmt.Fprintf(stdout, "mode:        %s\n", info.Mode)
	}
	fmt.Fprintf(stdout, "status:      %s\n", info.Status)
	fmt.Fprintf(stdout, "termination: %s\n", dash(info.Termination))
	if info.Trainable {
		fmt.Fprintln(stdout, "trainable:   yes")
	} else {
		fmt.Fprintf(stdout, "trainable:   no — %s\n", strings.Join(info.NotTrainable, "; "))
	}
	if info.Summary != "" {
		fmt.Fprintf(stdout, "summary:     %s\n", oneLine(info.Summary))
	}
	if info.Partial != "" {
		fmt.Fprintf(stdout, "partial:     %s\n", info.Partial)
	}
	if info.Error != "" {
		fmt.Fprintf(stdout, "error:       %s\n", oneLine(info.Error))
	}
	for _, c := range info.Compactions {
		switch {
		case c.Stopped != "":
			fmt.Fprintf(stdout, "compaction:  tier %d stopped: %s\n", c.Tier, c.Stopped)
		default:
			fmt.Fprintf(stdout, "compaction:  tier %d, %d → %d tokens (window %d), %d evicted\n", c.Tier, c.TokensBefore, c.TokensAfter, c.Window, len(c.Evicted))
		}
	}
	fmt.Fprintf(stdout, "model:       %s %s %s\n", info.Model.Provider, info.Model.Name, info.Model.BaseURL)
	fmt.Fprintf(stdout, "sandbox:     %s (network %s)\n", info.Sandbox.Kind, onOff(info.Sandbox.Network))
	reported := "reported"
	if !info.Usage.Reported {
		reported = "estimated or partly unreported"
	}
	fmt.Fprintf(stdout, "usage:       %d tokens (prompt %d, completion %d; %s)\n", info.Usage.TotalTokens, info.Usage.PromptTokens, info.Usage.CompletionTokens, reported)
	fmt.Fprintf(stdout, "steps:       %d turns, %d tool calls (%d errors), %d events\n", info.Turns, info.ToolCalls, info.ToolErrors, info.Events)
	for _, w := range info.Warnings {
		fmt.Fprintf(stdout, "WARNING:     %s\n", w)
	}
	if info.TornTail {
		fmt.Fprintln(stdout, "note:        the record's last line was torn (the process was killed mid-write)")
	}
	for _, s := range info.Steps {
		mark := ""
		if s.IsError {
			mark = "  [error]"
		}
		fmt.Fprintf(stdout, "  #%-5d %s t%d %s %s%s\n", s.Seq, s.Agent, s.Turn, s.Tool, clip(oneLine(s.Args), 70), mark)
	}
	showAgents(stdout, info.Agents)
	showDelivery(stdout, info)
	fmt.Fprintf(stdout, "files:       %d (under %s)\n", len(info.Files), info.RunDir)
	for _, f := range info.Files {
		fmt.Fprintf(stdout, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// showAgents prints per-agent activity, times relative to the first
// agent's start: the rows of a per-agent timeline.
func showAgents(w io.Writer, agents []run.AgentActivity) {
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
	fmt.Fprintln(tw, "  AGENT\tROLE\tITEM\tSTATE\tTURNS\tTOOLS\tERRORS\tACTIVE\tFROM→TO")
	for _, a := range agents {
		span := "-"
		if !a.From.IsZero() {
			span = "+" + short(a.From.Sub(start)) + "→+" + short(a.To.Sub(start))
		}
		errs := fmt.Sprint(a.ToolErrors)
		if a.ModelErrors > 0 {
			errs += fmt.Sprintf("+%d model", a.ModelErrors)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", a.Agent, dash(clip(a.Role, 24)), dash(a.Item), dash(a.State),
			a.Turns, a.ToolCalls, errs, short(time.Duration(a.ActiveMS)*time.Millisecond), span)
	}
	tw.Flush()
}

// showDelivery prints the reconciled delivery, the verification results
// and the final gate's failures, when the record has them.
func showDelivery(w io.Writer, info run.Info) {
	if d := info.Delivery; d != nil {
		verdict := "ok"
		if !d.OK {
			verdict = "FAILED: " + dash(d.Reason)
		}
		fmt.Fprintf(w, "delivery:    %s\n", verdict)
		for _, e := range d.Entries {
			line := fmt.Sprintf("  %-10s %s  %d bytes  by %s", e.Status, e.Path, e.Bytes, dash(e.Agent))
			if e.Reason != "" {
				line += "  " + e.Reason
				if e.Detail != "" {
					line += ": " + oneLine(e.Detail)
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
				line += ": " + clip(oneLine(v.Detail), 100)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(info.Failures) > 0 {
		fmt.Fprintf(w, "failures:    %d\n", len(info.Failures))
		for _, f := range info.Failures {
			fmt.Fprintf(w, "  - %s\n", oneLine(f))
		}
	}
}

// artifactEntry is one artifact of `show --artifacts --json`.
type artifactEntry struct {
	state.Artifact
	Provenance []state.Chain `json:"provenance"`
	Line       string        `json:"line"` // the chains on one line, as the text output prints them
}

// showArtifacts prints the artifact index I with provenance, and with
// --json also the control state K (lease, manifest, delivery).
func showArtifacts(dir string, jsonOut bool, stdout, stderr io.Writer) error {
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	st := state.New() // streamed: one line of the record at a time
	sc := record.NewScanner(f)
	for err == nil && sc.Next() {
		err = st.Apply(sc.Event())
	}
	if err == nil {
		err = sc.Err()
	}
	if err != nil {
		// The state up to the damaged event is still worth showing.
		fmt.Fprintf(stderr, "apodex show: the record is damaged, showing the state before it: %v\n", err)
	}
	if jsonOut {
		paths := slices.Sorted(maps.Keys(st.Artifacts))
		out := struct {
			RunID     string          `json:"run_id"`
			Artifacts []artifactEntry `json:"artifacts"`
			Control   state.Control   `json:"control"`
			Missing   []string        `json:"missing"`
			Counts    state.Counts    `json:"counts"`
		}{RunID: filepath.Base(dir), Artifacts: []artifactEntry{}, Control: st.Control, Missing: st.Missing(nil), Counts: st.Summary()}
		for _, p := range paths {
			chains := st.Provenance(p)
			if chains == nil {
				chains = []state.Chain{}
			}
			out.Artifacts = append(out.Artifacts, artifactEntry{Artifact: st.Artifacts[p], Provenance: chains, Line: state.Format(chains)})
		}
		if out.Missing == nil {
			out.Missing = []string{}
		}
		writeJSON(stdout, out)
		return nil
	}
	fmt.Fprintf(stdout, "run %s: %d artifacts\n", filepath.Base(dir), len(st.Artifacts))
	if err := st.RenderArtifacts(stdout); err != nil {
		return err
	}
	k := st.Control
	if len(k.Manifest) > 0 {
		holder := "free"
		if k.LeaseHolder != "" {
			holder = "held by " + k.LeaseHolder
		}
		fmt.Fprintf(stdout, "lease: %s; manifest: %s\n", holder, strings.Join(k.Manifest, ", "))
	}
	if missing := st.Missing(nil); len(missing) > 0 {
		fmt.Fprintf(stdout, "missing: %s\n", strings.Join(missing, ", "))
	}
	return nil
}

// short rounds a duration for a table: ms under a second, else tenths.
func short(d time.Duration) string {
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

func showGradeOf(dir string, jsonOut bool, stdout io.Writer) error {
	g, err := grade.Read(dir)
	if err != nil {
		return fmt.Errorf("%s has no grade yet (%v); run `apodex grade %s`", filepath.Base(dir), err, filepath.Base(dir))
	}
	if jsonOut {
		writeJSON(stdout, g)
		return nil
	}
	printGrade(stdout, g)
	return nil
}
