package eval

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// SolutionCalls are the tool calls that deliver w's reference solution:
// claim_outputs for the deliverables, then write_file for every file under
// solution/outputs and solution/workspace.
func SolutionCalls(w *world.World) ([]llm.ToolCall, error) {
	c, err := w.Contract()
	if err != nil {
		return nil, err
	}
	var calls []llm.ToolCall
	add := func(name string, args any) {
		raw, _ := json.Marshal(args)
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("oracle_%d", len(calls)), Name: name, Arguments: string(raw)})
	}
	if len(c.Deliverables) > 0 {
		var paths []string
		for _, d := range c.Deliverables {
			paths = append(paths, d.Path)
		}
		add("claim_outputs", map[string]any{"paths": paths})
	}
	for _, plane := range []string{"outputs", "workspace"} {
		root := filepath.Join(w.Solution(), plane)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			add("write_file", map[string]any{"path": "/" + plane + "/" + filepath.ToSlash(rel), "content": string(b)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return calls, nil
}

// Oracle is a model that plays w's reference solution in two turns (the
// calls of SolutionCalls, then finish): the upper bound of a suite, and an
// offline check that the whole pipeline scores a correct rollout as one.
func Oracle(w *world.World) (llm.Model, record.ModelSettings, error) {
	calls, err := SolutionCalls(w)
	if err != nil {
		return nil, record.ModelSettings{}, err
	}
	m := scripted.New(func(turn int, _ *llm.Request) (*llm.Response, error) {
		msg := llm.Message{Role: llm.RoleAssistant}
		switch turn {
		case 0:
			msg.ToolCalls = calls
		case 1:
			msg.ToolCalls = []llm.ToolCall{{ID: "oracle_finish", Name: "finish", Arguments: `{"summary":"delivered the reference solution"}`}}
		default:
			return nil, scripted.ErrEnded
		}
		return &llm.Response{Message: msg, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}, FinishReason: "tool_calls"}, nil
	})
	return m, record.ModelSettings{Provider: "oracle", Name: "oracle:" + w.ID}, nil
}
