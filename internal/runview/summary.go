package runview

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// SummaryFile is a run's summary: its row of `apodex runs`, kept next to
// the record by the run as it goes and repaired by readers from the
// record when it is missing or stale. Deleting it loses nothing.
const SummaryFile = "summary.json"

// summaryVersion changes when the summary's layout does.
const summaryVersion = 1

// Row is one run as `apodex runs` lists it: what the summary holds.
type Row struct {
	RunID       string     `json:"run_id"`
	RunDir      string     `json:"run_dir"`
	Objective   string     `json:"objective"`
	Mode        string     `json:"mode,omitempty"`
	World       string     `json:"world,omitempty"`
	Status      string     `json:"status"`
	Termination string     `json:"termination_reason,omitempty"`
	Started     time.Time  `json:"started"`
	Finished    *time.Time `json:"finished,omitempty"`
	Usage       llm.Usage  `json:"usage"`
	Turns       int        `json:"turns"`
	ToolCalls   int        `json:"tool_calls"`
	ToolErrors  int        `json:"tool_errors"`
	Events      int        `json:"events"`
	TornTail    bool       `json:"torn_tail,omitempty"`
	Paused      bool       `json:"paused,omitempty"`
}

// summary is the file: the row and the place in the record it covers.
type summary struct {
	Version int `json:"version"`
	// Size is events.jsonl's size the row covers; Boundary the line the
	// fold ended on (the same as Size unless the record has a torn tail).
	Size     int64             `json:"size"`
	Seq      int64             `json:"seq"`
	Boundary runstate.Boundary `json:"boundary"`
	Row      Row               `json:"run"`
}

// rowOf is the row of a folded record (no file is read: trainability is
// `show`'s, not the listing's).
func rowOf(dir string, st *runstate.Loaded) Row {
	r := Row{RunID: filepath.Base(dir), RunDir: dir, Mode: st.Mode(), Status: StatusRunning, Usage: st.Usage, Turns: st.Turns,
		ToolCalls: st.ToolCalls, ToolErrors: st.ToolErrors, Events: st.Events, TornTail: st.TornTail, Paused: st.Paused}
	if rs := st.Started; rs != nil {
		r.Objective, r.Started = rs.Objective, st.StartedAt
		if w, ok := RecordedWorld(*rs); ok {
			r.World = w.ID
		}
	}
	if rf := st.Finished; rf != nil {
		t := st.FinishedAt
		r.Finished = &t
		r.Turns, r.ToolCalls, r.Status, r.Termination = rf.Turns, rf.ToolCalls, rf.Status, rf.Termination
		r.Status = reviewed(r.Status, st.Review)
	}
	return r
}

// reviewed is the status of a finished run once a review decided it.
func reviewed(status string, rv *record.Review) string {
	if rv == nil || status != StatusAwaitingReview {
		return status
	}
	if rv.Decision == record.ReviewApproved {
		return StatusCompleted
	}
	return StatusFailed
}

// writeSummary writes the row of st as dir's summary; size is the size of
// events.jsonl the fold covered. A fold whose end is not known writes
// nothing.
func writeSummary(dir string, st *runstate.Loaded, size int64) error {
	b, ok, err := st.Boundary()
	if !ok || err != nil {
		return err
	}
	data, err := json.Marshal(summary{Version: summaryVersion, Size: size, Seq: st.Seq, Boundary: b, Row: rowOf(dir, st)})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+SummaryFile+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644) // as the record: readable where the run is
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, SummaryFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readSummary returns dir's row from its summary when the summary still
// covers the record as it is: the same size and, where the summary's fold
// ended, the same line.
func readSummary(dir string) (Row, bool) {
	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return Row{}, false
	}
	var s summary
	if json.Unmarshal(data, &s) != nil || s.Version != summaryVersion {
		return Row{}, false
	}
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return Row{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() != s.Size || !s.Boundary.Holds(f) {
		return Row{}, false
	}
	s.Row.RunID, s.Row.RunDir = filepath.Base(dir), dir // the directory may have been moved or copied
	return s.Row, true
}

// RowOf is the row of the run in dir: from its summary when that is
// fresh, else from the record (through the checkpoint), repairing the
// summary and, after a long tail, the checkpoint, unless the run is live
// (its own process keeps them).
func RowOf(dir string) (Row, error) {
	if r, ok := readSummary(dir); ok {
		return r, nil
	}
	size := fileSize(dir)
	st, tail, err := runstate.LoadViewFrom(dir)
	if err != nil {
		return Row{}, err
	}
	repair(dir, st, tail, size)
	return rowOf(dir, st), nil
}

// repair writes the summary and, when the fold read many events past the
// checkpoint, the checkpoint of a run that is not live. Failures are
// ignored: a home readers may not write is read the slow way.
func repair(dir string, st *runstate.Loaded, tail int, size int64) {
	if Liveness(dir) == Live {
		return
	}
	if !st.TornTail {
		if b, ok, _ := st.Boundary(); ok {
			size = b.End
		}
	}
	if size >= 0 && size == fileSize(dir) { // nothing was appended while we read
		writeSummary(dir, st, size)
	}
	if tail >= runstate.CheckpointEvery || (tail > 0 && !exists(filepath.Join(dir, runstate.CheckpointFile))) {
		// st is a view (no file provenance): the checkpoint needs the
		// whole state, folded once more, and then serves every reader.
		if whole, _, err := runstate.LoadFrom(dir); err == nil && whole.Seq == st.Seq {
			whole.WriteCheckpoint()
		}
	}
}

// loadState is the run's projection for show and status, without the
// file provenance (runstate.LoadViewFrom): the checkpoint plus the events
// after it, repairing what is stale.
func loadState(dir string) (*runstate.Loaded, error) {
	size := fileSize(dir)
	st, tail, err := runstate.LoadViewFrom(dir)
	if err != nil {
		return st, err
	}
	if tail > 0 {
		repair(dir, st, tail, size)
	}
	return st, nil
}

func fileSize(dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return -1
	}
	return fi.Size()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// List reads the row of every run under home, newest first, each from its
// summary (repaired from the record when stale). Unreadable runs are
// listed with the error as their status rather than hidden.
func List(home string) ([]Row, error) {
	entries, err := os.ReadDir(filepath.Join(home, "runs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(home, "runs", e.Name())
		r, err := RowOf(dir)
		if err != nil {
			r = Row{RunID: e.Name(), RunDir: dir, Status: "unreadable: " + err.Error()}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID > out[j].RunID })
	return out, nil
}
