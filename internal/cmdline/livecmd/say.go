// Package livecmd is the commands that talk to a live run from another
// process: apodex say (messages and budget changes), attach (follow and
// type), messages, pause and cancel, and review (decide a run awaiting a
// human). say, attach, pause and cancel write only to a live run's inbox
// and control files (the run records what it receives); review appends
// its decision to the record of a run awaiting review.
package livecmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
)

// liveRun finds a run that can still take messages: it exists and has not
// finished. A stopped (crashed) run keeps messages for its resume.
func liveRun(home, id string, stderr io.Writer) (dir string, live bool, err error) {
	dir, err = cmdline.FindRun(home, id)
	if err != nil {
		return "", false, err
	}
	switch runview.Liveness(dir) {
	case runview.Finished:
		info, _ := runview.Load(dir)
		return "", false, fmt.Errorf("run %s has finished (%s, %s); it takes no more messages", info.RunID, info.Status, info.Termination)
	case runview.Stopped:
		fmt.Fprintf(stderr, "apodex: run %s is not running (it stopped without finishing); this is kept and takes effect when it resumes (apodex resume %s)\n", filepath.Base(dir), id)
		return dir, false, nil
	}
	return dir, true, nil
}

func Say(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("say", `[flags] RUN "message"   |   --update ID RUN "new text"   |   --withdraw ID RUN   |   --budget KEY=VALUE [KEY=VALUE…] RUN`, stdout, stderr)
	home := fs.HomeFlag()
	update := fs.String("update", "", "replace the text of message ID, if it was not delivered yet")
	withdraw := fs.String("withdraw", "", "withdraw message ID, if it was not delivered yet")
	budget := fs.String("budget", "", "change budgets or deadlines, one or more KEY=VALUE: turns=60 tool_calls=+50 tokens=400000 deadline=+10m timeout=30m (+/- relative);\ne.g. apodex say --budget turns=+10 deadline=+5m RUN")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	modes := 0
	for _, set := range []bool{*update != "", *withdraw != "", *budget != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return cmdline.Usagef("use one of --update, --withdraw and --budget at a time")
	}
	if *budget != "" {
		return sayBudget(ctx, *home, append([]string{*budget}, pos...), stdout, stderr)
	}
	if len(pos) == 0 {
		return cmdline.Usagef("give the run id (see `apodex runs`)")
	}
	text := strings.TrimSpace(strings.Join(pos[1:], " "))
	switch {
	case *withdraw != "" && text != "":
		return cmdline.Usagef("--withdraw takes no text")
	case *withdraw == "" && text == "":
		return cmdline.Usagef(`no message: apodex say RUN "text"`)
	}
	dir, _, err := liveRun(*home, pos[0], stderr)
	if err != nil {
		return err
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
	default:
		var id string
		id, err = inbox.Send(dir, Sender(), text)
		if err == nil {
			fmt.Fprintln(stdout, id)
		}
	}
	return err
}

// budgetWait is how long say --budget waits for a live run to apply the change.
const budgetWait = 10 * time.Second

// sayBudget sends one budget control from KEY=VALUE words (the one word
// without '=' is the run id) and prints the budgets the run then has.
func sayBudget(ctx context.Context, home string, words []string, stdout, stderr io.Writer) error {
	id, b, pairs, err := inbox.BudgetArgs(words)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	dir, live, err := liveRun(home, id, stderr)
	if err != nil {
		return err
	}
	var after int64
	if last, err := record.Last(dir); err == nil {
		after = last.Seq
	}
	if err := inbox.Control(dir, inbox.ControlBudget, b); err != nil {
		return err
	}
	if !live {
		fmt.Fprintf(stdout, "budget change queued for %s: %s\n", filepath.Base(dir), pairs)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	for e, err := range record.Follow(ctx, dir, after) {
		if err != nil {
			return err
		}
		p, _ := record.DecodePayload(e)
		if c, ok := p.(*record.Control); ok && c.Kind == inbox.ControlBudget {
			fmt.Fprintf(stdout, "budget of %s: %s\n", filepath.Base(dir), runview.OneLine(c.Result))
			return nil
		}
	}
	fmt.Fprintf(stdout, "budget change sent to %s (%s); the run applies it before its next model call\n", filepath.Base(dir), pairs)
	return nil
}

func Sender() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "user"
}

// Control is pause, resume and cancel: they act on the runtime directly,
// whatever the model does.
func Control(kind string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		fs := cmdline.NewFlagSet(kind, "[flags] RUN", stdout, stderr)
		home := fs.HomeFlag()
		pos, err := fs.Parse(args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return cmdline.Usagef("give one run id (see `apodex runs`)")
		}
		dir, _, err := liveRun(*home, pos[0], stderr)
		if err != nil {
			return err
		}
		if err := inbox.Control(dir, kind, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s sent to %s\n", kind, filepath.Base(dir))
		return nil
	}
}

func Messages(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("messages", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON array")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	msgs, err := inbox.List(dir)
	if err != nil {
		return err
	}
	if *jsonOut {
		if msgs == nil {
			msgs = []inbox.Message{}
		}
		cmdline.WriteJSON(stdout, msgs)
		return nil
	}
	if len(msgs) == 0 {
		fmt.Fprintln(stdout, "no messages")
		return nil
	}
	inbox.RenderList(stdout, msgs)
	return nil
}
