package replay

import "github.com/apodex/apodex/internal/replay/divergence"

// Divergence is one place where a replay did not do what the record says
// (package divergence); Compared counts what was compared.
type (
	Divergence = divergence.Divergence
	Compared   = divergence.Compared
)

// Kinds of divergence: what differs.
const (
	KindInitialState = divergence.KindInitialState
	KindToolCall     = divergence.KindToolCall
	KindObservation  = divergence.KindObservation
	KindFile         = divergence.KindFile
	KindFinalFiles   = divergence.KindFinalFiles
	KindTurns        = divergence.KindTurns
	KindModel        = divergence.KindModel
)

// Classes of divergence: why it differs.
const (
	ClassNoise       = divergence.ClassNoise
	ClassEnvironment = divergence.ClassEnvironment
	ClassPolicy      = divergence.ClassPolicy
)
