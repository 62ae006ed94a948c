package run

import (
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/runinfo"
)

// The read models live in package runinfo and live control in package
// live; these names keep the callers of package run working.

// ErrUserCancel is the cause of a run cancelled by `apodex cancel`.
var ErrUserCancel = live.ErrUserCancel

// ErrNotFound: no run with that id under home.
var ErrNotFound = runinfo.ErrNotFound

// Liveness of a run as seen from another process.
const (
	Live     = runinfo.Live
	Finished = runinfo.Finished
	Stopped  = runinfo.Stopped
)

type (
	Info           = runinfo.Info
	CheckInfo      = runinfo.CheckInfo
	StepInfo       = runinfo.StepInfo
	Progress       = runinfo.Progress
	AgentActivity  = runinfo.AgentActivity
	AssignmentInfo = runinfo.AssignmentInfo
)

var (
	Dir           = runinfo.Dir
	Load          = runinfo.Load
	List          = runinfo.List
	Status        = runinfo.Status
	Liveness      = runinfo.Liveness
	Trainability  = runinfo.Trainability
	InputProblems = runinfo.InputProblems
	Activity      = runinfo.Activity
	Assignments   = runinfo.Assignments
	AssignmentsOf = runinfo.AssignmentsOf
	BoardOf       = runinfo.BoardOf
	ModeOf        = runinfo.ModeOf
)
