package runview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/termtext"
)

// watchEvery is how often Follow looks at what the record has folded.
const watchEvery = 500 * time.Millisecond

// modeReact is runstate's mode of a one-agent run.
const modeReact = "react"

// BoardView is the board of one run as its record says at Seq.
type BoardView struct {
	RunID       string           `json:"run_id"`
	Mode        string           `json:"mode"` // react or team; "" before the run started
	Seq         int64            `json:"seq"`  // the last event read
	Finished    bool             `json:"finished"`
	Status      string           `json:"status,omitempty"` // once finished
	Items       []board.Item     `json:"items"`
	Counts      board.Counts     `json:"counts"`
	Assignments []AssignmentInfo `json:"assignments"`
	Note        string           `json:"note,omitempty"` // why there is no board

	board *board.Board
	found bool // the record has board events
}

// BoardWatcher reads a run's board from its record; Follow follows the
// record (record.Follow) and folds what it has read, never re-reading the file.
type BoardWatcher struct {
	Dir  string
	JSON bool   // Follow prints one JSON object per line per change
	seen int    // events folded by the last print
	last string // what was printed last
}

// Read is the board as the whole record says.
func (w *BoardWatcher) Read() (BoardView, error) {
	st, err := loadState(w.Dir)
	if err != nil {
		return BoardView{}, err
	}
	return w.view(st.State)
}

// view is the board as the projection says.
func (w *BoardWatcher) view(st *runstate.State) (BoardView, error) {
	v := BoardView{RunID: filepath.Base(w.Dir), Mode: st.Mode(), Assignments: AssignmentsOf(st), Seq: st.Seq}
	if st.Finished != nil && st.FinishedSeq == st.Seq {
		v.Finished, v.Status = true, st.Finished.Status
	}
	v.board, v.found = st.Board, st.BoardEvents > 0
	if st.BoardErr != nil {
		return v, fmt.Errorf("the record's board events do not fold: %w", st.BoardErr)
	}
	v.Items, v.Counts = v.board.Items(), v.board.Counts()
	if v.Mode == modeReact && !v.found {
		v.Note = noBoard
	}
	if v.Assignments == nil {
		v.Assignments = []AssignmentInfo{}
	}
	return v, nil
}

// noBoard is what a react run shows instead of a board.
const noBoard = "this run has no task board (it ran in react mode)"

// text renders the view as `apodex board` prints it: a head line that
// names the run and the event read, and the body that --watch compares.
func (v BoardView) Text() (head, body string) {
	status := "running"
	if v.Finished {
		status = "finished, " + v.Status
	}
	head = fmt.Sprintf("run %s (%s) · board at event %d\n", v.RunID, status, v.Seq)
	switch {
	case v.Mode == modeReact && !v.found:
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, Dash(a.Item), Dash(Clip(a.Role, 32)), Dash(a.State), Dash(Clip(OneLine(a.Reason), 60)))
		}
		tw.Flush()
	}
	return head, b.String()
}

// Follow prints the board, then again each time it changes, until the run
// finishes (or, in react mode, at once) or ctx ends. With clear, each
// print first clears the terminal.
func (w *BoardWatcher) Follow(ctx context.Context, stdout io.Writer, clear bool) error {
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
		for e, err := range record.Follow(ctx, w.Dir, 0) {
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
func (w *BoardWatcher) poll(st *runstate.State, events int, stdout io.Writer, clear bool) (done bool, err error) {
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
	if w.JSON {
		var b bytes.Buffer
		json.NewEncoder(&b).Encode(v) // one line per change
		out = b.String()
		seq := v.Seq
		v.Seq = 0
		k, _ := json.Marshal(v)
		key, v.Seq = string(k), seq
	} else {
		head, body := v.Text()
		out, key = termtext.Clean(head+body), fmt.Sprint(v.Finished)+body
	}
	if key != w.last {
		if clear {
			io.WriteString(stdout, "\x1b[H\x1b[2J")
		}
		io.WriteString(stdout, out)
		w.last = key
	}
	return v.Finished || (v.Mode == modeReact && !v.found), nil
}
