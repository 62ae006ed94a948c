package tool

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

// FinishTool ends the run with a summary. Whether the run may end (the final
// gate) is the caller's decision; this tool only carries the request.
type FinishTool struct{}

// Spec describes finish.
func (FinishTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name:        "finish",
		Description: "End the run. Call it once the objective is done (files written), with a short summary of what was produced and where.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string","description":"What was done and which files hold the result."}},"required":["summary"],"additionalProperties":false}`),
	}
}

// Call validates the summary and returns the finish request.
func (FinishTool) Call(_ context.Context, args json.RawMessage) Result {
	var a struct {
		Summary string `json:"summary"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Errorf("finish: bad arguments: %v; expected {\"summary\": \"...\"}", err)
	}
	if strings.TrimSpace(a.Summary) == "" {
		return Errorf("finish: summary is empty; say what was produced and where")
	}
	return Result{Output: "run finished", Finish: &Finish{Summary: a.Summary}}
}
