package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/apodex/apodex/internal/run"
)

func cmdRuns(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs", "[flags]", stdout, stderr)
	home := fs.String("home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	jsonOut := fs.Bool("json", false, "print a JSON array")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "apodex runs: unexpected argument %q; to see one run use `apodex show RUN`\n", pos[0])
		return exitUsage
	}
	infos, err := run.List(homeDir(*home))
	if err != nil {
		fmt.Fprintf(stderr, "apodex runs: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		if infos == nil {
			infos = []run.Info{}
		}
		for i := range infos {
			infos[i].Steps = nil
		}
		writeJSON(stdout, infos)
		return exitOK
	}
	if len(infos) == 0 {
		fmt.Fprintf(stdout, "no runs under %s\n", homeDir(*home))
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tTERMINATION\tTURNS\tTOOLS\tOBJECTIVE")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", i.RunID, i.Status, dash(i.Termination), i.Turns, i.ToolCalls, clip(oneLine(i.Objective), 60))
	}
	tw.Flush()
	return exitOK
}

func cmdShow(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("show", "[flags] RUN", stdout, stderr)
	home := fs.String("home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	jsonOut := fs.Bool("json", false, "print a JSON object")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "apodex show: give one run id (see `apodex runs`)")
		return exitUsage
	}
	dir, err := run.Dir(homeDir(*home), pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "apodex show: %v\n", err)
		return exitFailed
	}
	info, err := run.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "apodex show: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		writeJSON(stdout, info)
		return exitOK
	}
	fmt.Fprintf(stdout, "run:         %s\n", info.RunID)
	fmt.Fprintf(stdout, "objective:   %s\n", oneLine(info.Objective))
	fmt.Fprintf(stdout, "status:      %s\n", info.Status)
	fmt.Fprintf(stdout, "termination: %s\n", dash(info.Termination))
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
	fmt.Fprintf(stdout, "sandbox:     %s (network %v)\n", info.Sandbox.Kind, info.Sandbox.Network)
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
	fmt.Fprintf(stdout, "files:       %d (under %s)\n", len(info.Files), info.RunDir)
	for _, f := range info.Files {
		fmt.Fprintf(stdout, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
	}
	return exitOK
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
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
