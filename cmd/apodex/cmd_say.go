package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/run"
)

// liveRun finds a run that can still take messages: it exists and has not
// finished. A stopped (crashed) run keeps messages for its resume.
func liveRun(cmd, home, id string, stderr io.Writer) (string, bool) {
	dir, err := run.Dir(homeDir(home), id)
	if err != nil {
		fmt.Fprintf(stderr, "apodex %s: %v\n", cmd, err)
		return "", false
	}
	switch run.Liveness(dir) {
	case run.Finished:
		info, _ := run.Load(dir)
		fmt.Fprintf(stderr, "apodex %s: run %s has finished (%s, %s); it takes no more messages\n", cmd, info.RunID, info.Status, info.Termination)
		return "", false
	case run.Stopped:
		fmt.Fprintf(stderr, "apodex %s: run %s is not running (it stopped without finishing); this is kept and takes effect when it resumes (apodex resume %s)\n", cmd, id, id)
	}
	return dir, true
}

func cmdSay(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("say", `[flags] RUN "message"   |   --update ID RUN "new text"   |   --withdraw ID RUN   |   --budget turns=60 RUN`, stdout, stderr)
	home := fs.homeFlag()
	update := fs.String("update", "", "replace the text of message ID, if it was not delivered yet")
	withdraw := fs.String("withdraw", "", "withdraw message ID, if it was not delivered yet")
	budget := fs.String("budget", "", "change budgets or deadlines: turns=60 tool_calls=+50 tokens=400000 deadline=+10m timeout=30m (+/- relative)")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "apodex say: give the run id (see `apodex runs`)")
		return exitUsage
	}
	text := strings.TrimSpace(strings.Join(pos[1:], " "))
	modes := 0
	for _, set := range []bool{*update != "", *withdraw != "", *budget != ""} {
		if set {
			modes++
		}
	}
	switch {
	case modes > 1:
		fmt.Fprintln(stderr, "apodex say: use one of --update, --withdraw and --budget at a time")
		return exitUsage
	case *withdraw != "" && text != "":
		fmt.Fprintln(stderr, "apodex say: --withdraw takes no text")
		return exitUsage
	case (*withdraw == "" && *budget == "") && text == "":
		fmt.Fprintln(stderr, `apodex say: no message: apodex say RUN "text"`)
		return exitUsage
	}
	dir, ok := liveRun("say", *home, pos[0], stderr)
	if !ok {
		return exitFailed
	}
	switch {
	case *update != "":
		err = inbox.Update(dir, strings.ToUpper(*update), text)
		if err == nil {
			fmt.Fprintln(stdout, strings.ToUpper(*update))
		}
	case *withdraw != "":
		err = inbox.Withdraw(dir, strings.ToUpper(*withdraw))
		if err == nil {
			fmt.Fprintln(stdout, strings.ToUpper(*withdraw))
		}
	case *budget != "":
		b, ok := inbox.ParseBudget(*budget)
		if !ok {
			fmt.Fprintf(stderr, "apodex say: --budget %q: use key=value pairs with turns, tool_calls, tokens, deadline or timeout\n", *budget)
			return exitUsage
		}
		err = inbox.Control(dir, inbox.ControlBudget, b)
	default:
		var id string
		id, err = inbox.Send(dir, sender(), text)
		if err == nil {
			fmt.Fprintln(stdout, id)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "apodex say: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func sender() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "user"
}

// cmdControl is pause, resume and cancel: they act on the runtime directly,
// whatever the model does.
func cmdControl(kind string) func(context.Context, []string, io.Writer, io.Writer) int {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		fs := newFlagSet(kind, "[flags] RUN", stdout, stderr)
		home := fs.homeFlag()
		pos, err := fs.parse(args)
		if err != nil {
			return flagExit(err)
		}
		if len(pos) != 1 {
			fmt.Fprintf(stderr, "apodex %s: give one run id\n", kind)
			return exitUsage
		}
		dir, ok := liveRun(kind, *home, pos[0], stderr)
		if !ok {
			return exitFailed
		}
		if err := inbox.Control(dir, kind, nil); err != nil {
			fmt.Fprintf(stderr, "apodex %s: %v\n", kind, err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "%s sent to %s\n", kind, pos[0])
		return exitOK
	}
}

func cmdMessages(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("messages", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.Bool("json", false, "print a JSON array")
	dir, code, ok := fs.oneRun(args, home)
	if !ok {
		return code
	}
	msgs, err := inbox.List(dir)
	if err != nil {
		fmt.Fprintf(stderr, "apodex messages: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		if msgs == nil {
			msgs = []inbox.Message{}
		}
		writeJSON(stdout, msgs)
		return exitOK
	}
	if len(msgs) == 0 {
		fmt.Fprintln(stdout, "no messages")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSEQ\tCLASS\tTEXT")
	for _, m := range msgs {
		seq := "-"
		if m.State == inbox.StateDelivered {
			seq = fmt.Sprint(m.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, seq, m.Class, clip(oneLine(m.Text), 70))
	}
	tw.Flush()
	return exitOK
}

func cmdStatus(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.Bool("json", false, "print a JSON object")
	dir, code, ok := fs.oneRun(args, home)
	if !ok {
		return code
	}
	p, err := run.Status(dir)
	if err != nil {
		fmt.Fprintf(stderr, "apodex status: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		writeJSON(stdout, p)
	} else {
		fmt.Fprintln(stdout, p.Text())
	}
	return exitOK
}
