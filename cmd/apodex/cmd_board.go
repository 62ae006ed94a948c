package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runstate"
)

// watchEvery is how often --watch looks at the record.
const watchEvery = 500 * time.Millisecond

func cmdBoard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("board", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.Bool("json", false, "print the board as JSON (with --watch: one object per line per change)")
	watch := fs.Bool("watch", false, "follow a live run: reprint when the board changes, until the run finishes")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	w := boardWatcher{dir: dir, json: *jsonOut}
	if !*watch {
		v, err := w.read()
		if err != nil {
			return err
		}
		if *jsonOut {
			writeJSON(stdout, v)
		} else {
			head, body := v.text()
			io.WriteString(stdout, head+body)
		}
		return nil
	}
	return w.follow(ctx, stdout)
}

// boardView is the board of one run as its record says at Seq.
type boardView struct {
	RunID       string               `json:"run_id"`
	Mode        string               `json:"mode"` // react or team; "" before the run started
	Seq         int64                `json:"seq"`  // the last event read
	Finished    bool                 `json:"finished"`
	Status      string               `json:"status,omitempty"` // once finished
	Items       []board.Item         `json:"items"`
	Counts      board.Counts         `json:"counts"`
	Assignments []run.AssignmentInfo `json:"assignments"`
	Note        string               `json:"note,omitempty"` // why there is no board

	board *board.Board
	found bool // the record has board events
}

// boardWatcher reads a run's board from its record; --watch follows the
// record (record.Follow) and folds what it has read, never re-reading the file.
type boardWatcher struct {
	dir  string
	json bool
	seen int    // events folded by the last print
	last string // what was printed last
}

func (w *boardWatcher) read() (boardView, error) {
	st, err := runstate.Load(w.dir)
	if err != nil {
		return boardView{}, err
	}
	return w.view(st.State)
}

// view is the board as the projection says.
func (w *boardWatcher) view(st *runstate.State) (boardView, error) {
	v := boardView{RunID: filepath.Base(w.dir), Mode: st.Mode(), Assignments: run.AssignmentsOf(st), Seq: st.Seq}
	if st.Finished != nil && st.FinishedSeq == st.Seq {
		v.Finished, v.Status = true, st.Finished.Status
	}
	v.board, v.found = st.Board, st.BoardEvents > 0
	if st.BoardErr != nil {
		return v, fmt.Errorf("the record's board events do not fold: %w", st.BoardErr)
	}
	v.Items, v.Counts = v.board.Items(), v.board.Counts()
	if v.Mode == run.ModeReact && !v.found {
		v.Note = noBoard
	}
	if v.Assignments == nil {
		v.Assignments = []run.AssignmentInfo{}
	}
	return v, nil
}

// noBoard is what a react run shows instead of a board.
const noBoard = "this run has no task board (it ran in react mode)"

// text renders the view as `apodex board` prints it: a head line that
// names the run and the event read, and the body that --watch compares.
func (v boardView) text() (head, body string) {
	status := "running"
	if v.Finished {
		status = "finished, " + v.Status
	}
	head = fmt.Sprintf("run %s (%s) · board at event %d\n", v.RunID, status, v.Seq)
	switch {
	case v.Mode == run.ModeReact && !v.found:
		return "", noBoard + "\n"
	case v.Mode == "":
		return "", fmt.Sprintf("run %s has not started yet\n", v.RunID)
	}
	var b strings.Builder
	if !v.found {
		b.WriteString("the board is empty: the lead has added no items\n")
	} else {
		v.board.Render(&b)
	}
	if len(v.Assignments) > 0 {
		b.WriteString("\nassignments:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tITEM\tROLE\tSTATE\tREASON")
		for _, a := range v.Assignments {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, dash(a.Item), dash(clip(a.Role, 32)), dash(a.State), dash(clip(oneLine(a.Reason), 60)))
		}
		tw.Flush()
	}
	return head, b.String()
}

// follow prints the board, then again each time it changes, until the run
// finishes (or, in react mode, at once) or ctx ends.
func (w *boardWatcher) follow(ctx context.Context, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		st   = runstate.New()
		n    int // events folded
		ferr error
	)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for e, err := range record.Follow(ctx, w.dir, 0) {
			mu.Lock()
			if err == nil {
				err = st.Apply(e)
				n++
			}
			if err != nil && ferr == nil {
				ferr = err
			}
			mu.Unlock()
		}
	}()
	clear := isTerminal(stdout) && !w.json
	// poll reads the state under the lock the follower folds it under.
	poll := func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if ferr != nil {
			return false, ferr
		}
		return w.poll(st, n, stdout, clear)
	}
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		var end bool
		select {
		case <-ctx.Done():
			return nil
		case <-ended:
			end = true
		case <-tick.C:
		}
		done, err := poll()
		if err != nil {
			return err
		}
		if done || end {
			return nil
		}
	}
}

// poll prints the board if the events changed what is shown; done means
// there is nothing more to follow.
func (w *boardWatcher) poll(st *runstate.State, events int, stdout io.Writer, clear bool) (done bool, err error) {
	if events == w.seen && w.last != "" {
		return false, nil
	}
	v, err := w.view(st)
	if err != nil {
		return false, err
	}
	w.seen = events
	// The seq moves with every event; print only when what is shown changed.
	var out, key string
	if w.json {
		var b bytes.Buffer
		json.NewEncoder(&b).Encode(v) // one line per change
		out = b.String()
		seq := v.Seq
		v.Seq = 0
		k, _ := json.Marshal(v)
		key, v.Seq = string(k), seq
	} else {
		head, body := v.text()
		out, key = head+body, fmt.Sprint(v.Finished)+body
	}
	if key != w.last {
		if clear {
			io.WriteString(stdout, "\x1b[H\x1b[2J")
		}
		io.WriteString(stdout, out)
		w.last = key
	}
	return v.Finished || (v.Mode == run.ModeReact && !v.found), nil
}

// isTerminal reports whether w is a terminal, where --watch redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
