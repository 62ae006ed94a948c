package web

// This file is the one adapter between the server and run state: every
// view of a run is read from its live state (live.go), never from the
// record itself.

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

func loadRun(l *liveRun) (any, error) {
	d := runDetail{Info: l.summary(), Liveness: l.liveness(), Paused: l.st.Paused, LastSeq: l.st.Seq}
	d.RunDir = "" // the server's file system is not the client's business
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

func loadBoard(l *liveRun) (any, error) {
	st := l.st
	v := boardView{Found: st.BoardEvents > 0, Items: st.Board.Items(), Counts: st.Board.Counts(),
		Assignments: runview.AssignmentsOf(st.State), LastSeq: st.Seq}
	if st.BoardErr != nil {
		v.Error = st.BoardErr.Error()
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

func loadActivity(l *liveRun) (any, error) {
	v := activityView{Agents: l.summary().Agents, LastSeq: l.st.Seq}
	if l.st.Seq > 0 {
		v.Start, v.End = l.first, l.st.LastTime
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

func loadFiles(l *liveRun) (any, error) {
	st := l.st.Files
	v := filesView{Files: []fileView{}, Missing: st.Missing(nil)}
	if l.st.FilesErr != nil {
		v.Damaged = l.st.FilesErr.Error()
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

func loadEvidence(l *liveRun) (any, error) { return evidenceOf(l) }

func evidenceOf(l *liveRun) ([]evidenceEntry, error) {
	st := l.st
	if st.EvidenceErr != nil {
		return nil, st.EvidenceErr
	}
	out := []evidenceEntry{}
	if len(st.Evidence) == 0 {
		return out, nil
	}
	uses := st.Cited.With(filepath.Join(l.dir, "outputs"))
	for _, it := range st.Evidence {
		en := evidenceEntry{Evidence: it, Agent: st.EvidenceAgent[it.ID], CitedIn: uses[it.ID]}
		en.Text = l.evidenceText(it) // the exact text, inline or from its blob
		if en.CitedIn == nil {
			en.CitedIn = []evidence.Use{}
		}
		out = append(out, en)
	}
	return out, nil
}

// evidenceText is the exact text of it ("" when its blob cannot be read);
// a blob is read once.
func (l *liveRun) evidenceText(it record.Evidence) string {
	if it.TextRef == "" {
		return it.Text
	}
	if t, ok := l.texts[it.ID]; ok {
		return t
	}
	t, err := evidence.ReadText(l.dir, it)
	if err == nil {
		l.texts[it.ID] = t
	}
	return t
}
