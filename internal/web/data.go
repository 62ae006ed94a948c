package web

// This file is the one adapter between the server and run state: when the
// run-state projection lands, these functions read it instead.

import (
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/state"
)

// runListing is one row of /api/runs.
type runListing struct {
	ID        string `json:"id"`
	Objective string `json:"objective"`
	Mode      string `json:"mode,omitempty"`
	Liveness  string `json:"liveness"`
	Paused    bool   `json:"paused,omitempty"`
	Status    string `json:"status"`
	// Termination is why a finished run ended (gate_failed, budget_turns…).
	Termination string     `json:"termination_reason,omitempty"`
	Started     time.Time  `json:"started"`
	Finished    *time.Time `json:"finished,omitempty"`
	Usage       llm.Usage  `json:"usage"`
	Events      int        `json:"events"`
}

func listRuns(home string) ([]runListing, error) {
	infos, err := runview.List(home)
	if err != nil {
		return nil, err
	}
	out := []runListing{}
	for _, in := range infos {
		l := runListing{ID: in.RunID, Objective: in.Objective, Mode: in.Mode, Liveness: runview.Liveness(in.RunDir),
			Status: in.Status, Termination: in.Termination, Started: in.Started, Finished: in.Finished, Usage: in.Usage, Events: in.Events}
		if l.Liveness != runview.Finished {
			if p, err := runview.Status(in.RunDir); err == nil {
				l.Paused = p.Paused
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// runDetail is /api/runs/{id}: the summary, agents and usage.
type runDetail struct {
	runview.Info
	Liveness string `json:"liveness"`
	Paused   bool   `json:"paused"`
	LastSeq  int64  `json:"last_seq"`
}

func loadRun(dir string) (runDetail, error) {
	info, err := runview.Load(dir)
	if err != nil {
		return runDetail{}, err
	}
	d := runDetail{Info: info, Liveness: runview.Liveness(dir)}
	d.RunDir = "" // the server's file system is not the client's business
	if p, err := runview.Status(dir); err == nil {
		d.Paused = p.Paused
	}
	if last, err := record.Last(dir); err == nil {
		d.LastSeq = last.Seq
	}
	return d, nil
}

// boardView is /board: the items, their counts and the assignments.
type boardView struct {
	Found       bool                     `json:"found"` // false: the run has no board (react, or not planned yet)
	Items       []board.Item             `json:"items"`
	Counts      board.Counts             `json:"counts"`
	Assignments []runview.AssignmentInfo `json:"assignments"`
	Error       string                   `json:"error,omitempty"`
	LastSeq     int64                    `json:"last_seq"`
}

func loadBoard(dir string) (boardView, error) {
	c, err := record.Read(dir)
	if err != nil {
		return boardView{}, err
	}
	b, found, err := runview.BoardOf(c.Events)
	v := boardView{Found: found, Items: b.Items(), Counts: b.Counts(), Assignments: runview.Assignments(c.Events), LastSeq: lastSeq(c.Events)}
	if err != nil {
		v.Error = err.Error()
	}
	if v.Items == nil {
		v.Items = []board.Item{}
	}
	if v.Assignments == nil {
		v.Assignments = []runview.AssignmentInfo{}
	}
	return v, nil
}

// activityView is /activity: one lane per agent on the run's time axis.
type activityView struct {
	Start   time.Time               `json:"start"`
	End     time.Time               `json:"end"` // the last event so far
	Agents  []runview.AgentActivity `json:"agents"`
	LastSeq int64                   `json:"last_seq"`
}

func loadActivity(dir string) (activityView, error) {
	c, err := record.Read(dir)
	if err != nil {
		return activityView{}, err
	}
	v := activityView{Agents: runview.Activity(c.Events), LastSeq: lastSeq(c.Events)}
	if n := len(c.Events); n > 0 {
		v.Start, v.End = c.Events[0].Time, c.Events[n-1].Time
	}
	if v.Agents == nil {
		v.Agents = []runview.AgentActivity{}
	}
	return v, nil
}

// fileView is one produced file with its provenance chains.
type fileView struct {
	state.Artifact
	Provenance []state.Chain `json:"provenance"`
	Line       string        `json:"line"`
}

type filesView struct {
	Files   []fileView `json:"files"`
	Missing []string   `json:"missing"`
	Damaged string     `json:"damaged,omitempty"` // the record broke here; the state is the one before
}

func loadFiles(dir string) (filesView, error) {
	c, err := record.Read(dir)
	if err != nil {
		return filesView{}, err
	}
	st, err := state.FromRecord(c.Events)
	v := filesView{Files: []fileView{}, Missing: st.Missing(nil)}
	if err != nil {
		v.Damaged = err.Error()
	}
	for _, p := range slices.Sorted(maps.Keys(st.Artifacts)) {
		chains := st.Provenance(p)
		if chains == nil {
			chains = []state.Chain{}
		}
		v.Files = append(v.Files, fileView{Artifact: st.Artifacts[p], Provenance: chains, Line: state.Format(chains)})
	}
	if v.Missing == nil {
		v.Missing = []string{}
	}
	return v, nil
}

// evidenceEntry is one id of Q with its text and where it was cited.
type evidenceEntry struct {
	record.Evidence
	Agent   string         `json:"agent,omitempty"`
	CitedIn []evidence.Use `json:"cited_in"`
}

func loadEvidence(dir string) ([]evidenceEntry, error) {
	c, err := record.Read(dir)
	if err != nil {
		return nil, err
	}
	items, err := evidence.Fold(c.Events)
	if err != nil {
		return nil, err
	}
	out := []evidenceEntry{}
	if len(items) == 0 {
		return out, nil
	}
	q, err := evidence.FromRecord(dir)
	if err != nil {
		return nil, err
	}
	agents := map[string]string{}
	for _, e := range c.Events {
		var it record.Evidence
		if e.Type == record.TypeEvidence && e.Decode(&it) == nil {
			agents[it.ID] = e.Agent
		}
	}
	uses := evidence.Uses(c.Events, filepath.Join(dir, "outputs"))
	for _, it := range items {
		en := evidenceEntry{Evidence: it, Agent: agents[it.ID], CitedIn: uses[it.ID]}
		en.Text, _ = q.Text(it.ID) // the exact text, inline or from its blob
		if en.CitedIn == nil {
			en.CitedIn = []evidence.Use{}
		}
		out = append(out, en)
	}
	return out, nil
}

func lastSeq(evs []record.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}
