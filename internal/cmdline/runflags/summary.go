package runflags

import (
	"errors"
	"fmt"
	"io"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
)

// Finish prints a run's outcome (the summary, or JSON) and turns it into
// the command's error: nil only when the run completed.
func (o *Output) Finish(s run.Summary, err error, stdout, stderr io.Writer) error {
	switch {
	case err != nil && s.RunID == "":
		return err
	case errors.Is(err, run.ErrHalted):
		if o.JSON {
			cmdline.WriteJSON(stdout, s)
		}
		fmt.Fprintf(stderr, "apodex: run %s stopped; go on with: apodex resume %s\n", s.RunID, s.RunID)
		return cmdline.ExitError(cmdline.ExitFailed)
	case err != nil:
		fmt.Fprintf(stderr, "apodex: %v\n", err)
	}
	if o.JSON {
		cmdline.WriteJSON(stdout, s)
	} else {
		PrintSummary(stdout, s)
	}
	if s.Status != run.StatusCompleted {
		if !o.Quiet && !o.JSON && s.Error != "" {
			fmt.Fprintf(stderr, "apodex: ended with %s: %s\n", s.Termination, runview.OneLine(s.Error))
		}
		if s.Status == run.StatusStopped && !o.JSON {
			hint := map[string]string{"budget_turns": " --budget turns=+10", "budget_tool_calls": " --budget tool_calls=+50", "budget_tokens": " --budget tokens=+200000"}[s.Termination]
			fmt.Fprintf(stderr, "apodex: run %s stopped (%s); go on with: apodex resume%s %s\n", s.RunID, s.Termination, hint, s.RunID)
		}
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}

func PrintSummary(w io.Writer, s run.Summary) {
	fmt.Fprintf(w, "run %s: %s (%s)\n", s.RunID, s.Status, s.Termination)
	if s.Summary != "" {
		fmt.Fprintf(w, "summary: %s\n", runview.OneLine(s.Summary))
	}
	if s.Partial != "" {
		fmt.Fprintf(w, "partial result: %s\n", s.Partial)
	}
	if s.Error != "" && len(s.Failures) == 0 {
		fmt.Fprintf(w, "error: %s\n", runview.OneLine(s.Error))
	}
	for _, f := range s.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", runview.OneLine(f))
	}
	fmt.Fprintf(w, "turns %d, tool calls %d, tokens %d (prompt %d, completion %d)\n",
		s.Turns, s.ToolCalls, s.Usage.TotalTokens, s.Usage.PromptTokens, s.Usage.CompletionTokens)
	if s.Delivery != nil {
		fmt.Fprintln(w, "delivery:")
		for _, e := range s.Delivery.Entries {
			if e.Status == "delivered" {
				fmt.Fprintf(w, "  delivered %s  %d bytes  %s\n", e.Path, e.Bytes, e.SHA256)
			} else {
				fmt.Fprintf(w, "  FAILED    %s  %s\n", e.Path, e.Reason)
			}
		}
		for _, u := range s.Delivery.Undeclared {
			fmt.Fprintf(w, "  undeclared (not delivered) %s\n", u)
		}
	}
	for _, v := range s.Verify {
		mark := "passed"
		if !v.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(w, "verify %s: %s %s\n", v.Label(), mark, runview.OneLine(v.Detail))
	}
	fmt.Fprintf(w, "record: %s/events.jsonl\n", s.RunDir)
	if len(s.Files) > 0 {
		fmt.Fprintf(w, "files (under %s):\n", s.RunDir)
		for i, f := range s.Files {
			if i == shownFiles && len(s.Files) > shownFiles+1 {
				fmt.Fprintf(w, "  … and %d more (apodex show --json %s)\n", len(s.Files)-shownFiles+s.FilesOmitted, s.RunID)
				return
			}
			fmt.Fprintf(w, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
		}
		if s.FilesOmitted > 0 {
			fmt.Fprintf(w, "  … and %d more, not listed in the record\n", s.FilesOmitted)
		}
	}
	if s.WorldFiles > 0 {
		fmt.Fprintf(w, "files of the world, unchanged: %d (its manifest lists them)\n", s.WorldFiles)
	}
}

// shownFiles is how many produced files the run's summary prints.
const shownFiles = 50
