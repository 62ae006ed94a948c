package runview

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/verify"
)

// Info is what the record says about a run, for `runs` and `show`.
type Info struct {
	RunID     string `json:"run_id"`
	RunDir    string `json:"run_dir"`
	Objective string `json:"objective"`
	Mode      string `json:"mode,omitempty"` // react or team
	// World is the stored world the run is a rollout of, if any.
	World string `json:"world,omitempty"`
	// WorkspaceBase is the world whose stored workspace holds what the
	// run's workspace/ does not: a finished rollout keeps only what it
	// changed (runfiles.Base). Empty when workspace/ is the whole tree.
	WorkspaceBase string `json:"workspace_base,omitempty"`
	Status        string `json:"status"`
	// Review is the decision on a run that awaited review.
	Review      *record.Review       `json:"review,omitempty"`
	Termination string               `json:"termination_reason,omitempty"`
	Summary     string               `json:"summary,omitempty"`
	Partial     string               `json:"partial_result,omitempty"`
	Error       string               `json:"error,omitempty"`
	Compactions []record.Compaction  `json:"compactions,omitempty"`
	Model       record.ModelSettings `json:"model"`
	// Resumes are the segments after the first: where each resume picked
	// up, why, and the model it called (nil in older records: as before).
	Resumes    []record.Resumed       `json:"resumes,omitempty"`
	Sandbox    record.SandboxSettings `json:"sandbox"`
	Started    time.Time              `json:"started"`
	Finished   *time.Time             `json:"finished,omitempty"`
	Usage      llm.Usage              `json:"usage"`
	Turns      int                    `json:"turns"`
	ToolCalls  int                    `json:"tool_calls"`
	ToolErrors int                    `json:"tool_errors"`
	Events     int                    `json:"events"`
	TornTail   bool                   `json:"torn_tail,omitempty"`
	Warnings   []string               `json:"warnings,omitempty"`
	Files      []record.FileEntry     `json:"files"`
	// FilesOmitted counts the files run_finished did not list.
	FilesOmitted int `json:"files_omitted,omitempty"`
	// WorldFiles counts a world rollout's files left as its world has
	// them, which Files does not list (record.RunFinished.WorldFiles).
	WorldFiles int        `json:"world_files,omitempty"`
	Steps      []StepInfo `json:"steps"`
	// Agents is per-agent activity: who was active when, and how much.
	Agents []AgentActivity `json:"agents"`
	// Delivery is the reconciled manifest, when the run recorded one.
	Delivery *record.Delivery `json:"delivery,omitempty"`
	// Verification is every deliverable check and verifier clause result.
	Verification []CheckInfo `json:"verification,omitempty"`
	// Failures are what the final gate found wrong (run_finished).
	Failures []string `json:"failures,omitempty"`
	// Trainable says whether the trajectory can be reproduced and trained
	// on; NotTrainable says why not (see Trainability).
	Trainable    bool     `json:"trainable"`
	NotTrainable []string `json:"not_trainable,omitempty"`

	// MCP are the run's MCP servers and their tools (run_started).
	MCP []record.MCPOffered `json:"mcp,omitempty"`
}

// CheckInfo is one recorded verification result: a deliverable check
// (Kind "deliverable") or a task verifier clause (Kind the clause's kind).
type CheckInfo struct {
	Kind   string `json:"kind"`
	Label  string `json:"label"` // "check non_empty /outputs/sum.txt", "verify[1] (tests)"
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// checkInfo is a verification result for display.
func checkInfo(v record.Verification) CheckInfo {
	if v.Check != "" {
		return CheckInfo{Kind: "deliverable", Label: "check " + v.Check + " " + v.Path, Passed: v.Passed, Detail: v.Detail}
	}
	r := verify.Result{Index: v.Index, Name: v.Name, Kind: v.Kind}
	return CheckInfo{Kind: v.Kind, Label: r.Label(), Passed: v.Passed, Detail: v.Detail}
}

// StepInfo is one tool call as recorded.
type StepInfo = runstate.Step

// ErrNotFound: no run with that id under home.
var ErrNotFound = errors.New("run: no such run")

// Dir returns the directory of run id (or unique id prefix) under home.
func Dir(home, id string) (string, error) {
	runs := filepath.Join(home, "runs")
	isRun := func(d string) bool {
		st, err := os.Stat(filepath.Join(d, record.EventsFile))
		return err == nil && st.Mode().IsRegular()
	}
	if id != "" && id == filepath.Base(id) && id != "." && id != ".." {
		if d := filepath.Join(runs, id); isRun(d) {
			return d, nil
		}
		all, _ := filepath.Glob(filepath.Join(runs, id+"*"))
		var matches []string
		for _, m := range all {
			if isRun(m) {
				matches = append(matches, m)
			}
		}
		if len(matches) == 1 {
			return matches[0], nil
		}
		if len(matches) > 1 {
			return "", fmt.Errorf("%w: %q matches %d runs; give more of the id", ErrNotFound, id, len(matches))
		}
	}
	return "", fmt.Errorf("%w: %q under %s (list runs with `apodex runs`)", ErrNotFound, id, runs)
}

// Load reads a run's record into an Info (through the run's projection,
// runstate, from its checkpoint and the events after it). Events of a
// type this version does not know are skipped and named in Warnings.
func Load(dir string) (Info, error) {
	st, err := loadState(dir)
	if err != nil {
		return Info{}, err
	}
	return infoOf(dir, st), nil
}

// InfoOf is Load for a record the caller has already folded with
// runstate.Load.
func InfoOf(st *runstate.Loaded) Info { return infoOf(st.Dir, st) }

func infoOf(dir string, st *runstate.Loaded) Info {
	info := Info{RunID: filepath.Base(dir), RunDir: dir, Mode: st.Mode(), Status: StatusRunning, Events: st.Events, TornTail: st.TornTail,
		Files: []record.FileEntry{}, Agents: activityOf(st.State), Usage: st.Usage, Turns: st.Turns, ToolCalls: st.ToolCalls,
		ToolErrors: st.ToolErrors, Compactions: st.Compactions}
	if rs := st.Started; rs != nil {
		info.Objective, info.Model, info.Sandbox, info.Started = rs.Objective, rs.Model, rs.Sandbox, st.StartedAt
		info.MCP = rs.MCP
		if w, ok := RecordedWorld(*rs); ok {
			info.World = w.ID
			switch b, err := runfiles.ReadBaseOf(dir, w.ID); {
			case err != nil:
				info.Warnings = append(info.Warnings, "the run's workspace cannot be read: "+err.Error())
			case b != nil:
				info.WorkspaceBase = b.World
			}
		}
	}
	info.Resumes = st.Resumes
	if len(st.Steps) > 0 {
		info.Steps = st.Steps // shared, not copied: a long run has tens of thousands
	}
	for _, w := range st.Warnings {
		info.Warnings = append(info.Warnings, w.Message)
	}
	info.Warnings = append(info.Warnings, st.Skipped...)
	info.Delivery = st.Delivery
	for _, v := range st.Checks {
		info.Verification = append(info.Verification, checkInfo(v))
	}
	if rf := st.Finished; rf != nil {
		t := st.FinishedAt
		info.Finished = &t
		info.Turns, info.ToolCalls = rf.Turns, rf.ToolCalls // the loop's own count, including calls that got no reply
		info.Status, info.Termination, info.Summary, info.Partial, info.Error, info.Files, info.FilesOmitted = rf.Status, rf.Termination, rf.Summary, rf.Partial, rf.Error, rf.Files, rf.FilesOmitted
		info.WorldFiles = rf.WorldFiles
		info.Failures = rf.Failures
		if info.Files == nil {
			info.Files = []record.FileEntry{}
		}
		info.NotTrainable = trainability(dir, st, nil)
		if rv := st.Review; rv != nil && info.Status == StatusAwaitingReview {
			info.Review = rv
			info.Status = reviewed(info.Status, rv)
		}
	} else { // a live run is not hashed and checked on every look
		info.NotTrainable = []string{"the record is incomplete: the run has not finished (no run_finished)"}
	}
	info.Trainable = len(info.NotTrainable) == 0
	return info
}
