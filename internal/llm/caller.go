package llm

import (
	"context"
	"net/http"
)

// Caller is who makes a model call: the run, the agent and its role. HTTP
// clients send it as the X-Apodex-Run, X-Apodex-Agent and X-Apodex-Role
// headers, so a proxy can route or log by them and a test endpoint can
// tell conversations apart.
type Caller struct {
	Run   string
	Agent string
	Role  string
}

// Roles of callers. Later roles (investigator, writer, judge, grade-*) are
// plain strings too.
const (
	CallerSingle     = "single"
	CallerLead       = "lead"
	CallerSubagent   = "subagent"
	CallerVerifier   = "verifier"
	CallerSummarizer = "summarizer"
	CallerSalvage    = "salvage"

	// The process grader's four stages (internal/grade).
	CallerGradeMapper   = "grade-mapper"
	CallerGradeJudge    = "grade-judge"
	CallerGradeReviewer = "grade-reviewer"
	CallerGradeArbiter  = "grade-arbiter"
)

// The headers a Caller is sent as.
const (
	HeaderRun   = "X-Apodex-Run"
	HeaderAgent = "X-Apodex-Agent"
	HeaderRole  = "X-Apodex-Role"
)

type callerKey struct{}

// WithCaller returns ctx carrying c. Empty fields of c keep the values ctx
// already carries, so the run can set Run once and each agent its own
// Agent and Role.
func WithCaller(ctx context.Context, c Caller) context.Context {
	old := CallerFrom(ctx)
	if c.Run == "" {
		c.Run = old.Run
	}
	if c.Agent == "" {
		c.Agent = old.Agent
	}
	if c.Role == "" {
		c.Role = old.Role
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries (zero if none).
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// SetCallerHeaders sets the caller headers of ctx's Caller on h; empty
// fields are left off.
func SetCallerHeaders(ctx context.Context, h http.Header) {
	c := CallerFrom(ctx)
	for _, kv := range [][2]string{{HeaderRun, c.Run}, {HeaderAgent, c.Agent}, {HeaderRole, c.Role}} {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
}
