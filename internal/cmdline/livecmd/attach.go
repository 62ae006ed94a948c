package livecmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// attachHelp is what attach says it takes, at the start and on /help.
const attachHelp = "type a message and Enter to send it to the run; /pause, /resume, /cancel, /budget KEY=VALUE… (turns=+10 deadline=+5m); Ctrl-D or Ctrl-C detaches (the run goes on)"

// Attach follows a live run's progress and sends each line typed as a
// message to it (or, with a leading slash, a control).
func Attach(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("attach", "[flags] RUN   (live progress, and a prompt: "+attachHelp+")", stdout, stderr)
	home := fs.HomeFlag()
	verbose := fs.Bool("verbose", false, "more progress: commands' whole output (up to 200 lines), observations, board changes, leases, delivery rows")
	history := fs.Int("history", 20, "also print the progress of the last N events before attaching")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	id := filepath.Base(dir)
	switch runview.Liveness(dir) {
	case runview.Finished:
		info, _ := runview.Load(dir)
		return fmt.Errorf("run %s has finished (%s, %s): there is nothing to attach to; `apodex log %s` shows it, `apodex resume %s` goes on after a model error", id, info.Status, info.Termination, id, id)
	case runview.Stopped:
		return fmt.Errorf("run %s is not running (its process stopped without finishing): `apodex resume %s` continues it, with its progress", id, id)
	}
	var after int64
	if last, err := record.Last(dir); err == nil {
		after = max(0, last.Seq-int64(max(*history, 0)))
	}
	// No status line: it would be redrawn over what the user types.
	p := progress.New(termtext.Raw(stdout), progress.Options{Verbose: *verbose, Style: transcript.Style{Color: progress.Colour(stdout)}})
	p.Note(fmt.Sprintf("attached to run %s: %s", id, attachHelp))

	ctx, stopped, cancel := UntilStopped(ctx, dir)
	defer cancel()
	followed := make(chan error, 1)
	go func() { followed <- p.Follow(ctx, dir, after) }()
	// The reader of standard input cannot be interrupted; it ends with the
	// input (or the process), and drops what comes after the detach.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(cmdline.Stdin(ctx))
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cancel()
				<-followed
				p.Note("detached; the run goes on (apodex attach " + id + " to come back)")
				return nil
			}
			if said := attachSend(dir, l); said != "" {
				p.Note(said)
			}
		case err := <-followed:
			switch {
			case err != nil:
				return err
			case stopped():
				return fmt.Errorf("run %s stopped without finishing (its process died); `apodex resume %s` continues it", id, id)
			case ctx.Err() != nil: // Ctrl-C
				p.Note("detached; the run goes on (apodex attach " + id + " to come back)")
				return nil
			}
			if info, err := runview.Load(dir); err == nil && info.Status != run.StatusCompleted {
				return cmdline.ExitError(cmdline.ExitFailed)
			}
			return nil
		}
	}
}

// attachSend sends one typed line to the run in dir and says what it did.
func attachSend(dir, line string) string {
	line = strings.TrimSpace(line)
	words := strings.Fields(line)
	switch {
	case line == "":
		return ""
	case !strings.HasPrefix(line, "/"):
		id, err := inbox.Send(dir, Sender(), line)
		if err != nil {
			return "not sent: " + err.Error()
		}
		return "sent " + id + " (it reaches the agent before its next model call; apodex messages lists it)"
	case words[0] == "/help":
		return attachHelp
	case words[0] == "/pause" || words[0] == "/resume" || words[0] == "/cancel":
		kind := strings.TrimPrefix(words[0], "/")
		if len(words) > 1 {
			return fmt.Sprintf("/%s takes nothing after it", kind)
		}
		if err := inbox.Control(dir, kind, nil); err != nil {
			return kind + " not sent: " + err.Error()
		}
		return kind + " sent"
	case words[0] == "/budget":
		_, b, pairs, err := inbox.BudgetArgs(append(words[1:], filepath.Base(dir)))
		if err != nil {
			return "/budget takes KEY=VALUE pairs with turns, tool_calls, tokens, deadline or timeout, e.g. /budget turns=+10 deadline=+5m"
		}
		if err := inbox.Control(dir, inbox.ControlBudget, b); err != nil {
			return "budget not sent: " + err.Error()
		}
		return "budget change sent: " + pairs
	}
	return fmt.Sprintf("unknown command %s; %s", words[0], attachHelp)
}

// UntilStopped is ctx, also ended when the run in dir stops without
// finishing (its process died: it will never write run_finished); stopped
// reports whether that is why it ended.
func UntilStopped(ctx context.Context, dir string) (_ context.Context, stopped func() bool, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(ctx)
	died := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if runview.Liveness(dir) == runview.Stopped {
					time.Sleep(500 * time.Millisecond) // let the follower read what the process wrote last
					close(died)
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() bool {
		select {
		case <-died:
			return true
		default:
			return false
		}
	}, cancel
}
