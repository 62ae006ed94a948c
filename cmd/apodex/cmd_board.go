package main

import (
	"context"
	"io"
	"os"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
)

func cmdBoard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("board", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.Bool("json", false, "print the board as JSON (with --watch: one object per line per change)")
	watch := fs.Bool("watch", false, "follow a live run: reprint when the board changes, until the run finishes")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	w := runview.BoardWatcher{Dir: dir, JSON: *jsonOut}
	if !*watch {
		v, err := w.Read()
		if err != nil {
			return err
		}
		if *jsonOut {
			cmdline.WriteJSON(stdout, v)
		} else {
			head, body := v.Text()
			io.WriteString(stdout, head+body)
		}
		return nil
	}
	// The watcher cleans the board's text itself (it clears the screen
	// between prints) and keeps JSON exact.
	return w.Follow(ctx, termtext.Raw(stdout), isTerminal(stdout) && !*jsonOut)
}

// isTerminal reports whether w is a terminal, where --watch redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := termtext.Raw(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
