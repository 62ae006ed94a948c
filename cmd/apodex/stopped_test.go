package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// TestBudgetHitStopsAndResumesWithMoreBudget: a run out of turns stops
// (resumable, with the reason); resume --budget raises the limit and the
// run goes on to its end.
func TestBudgetHitStopsAndResumesWithMoreBudget(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	busy := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		return calls(call("write_file", map[string]any{"path": "/workspace/n.txt", "content": strings.Repeat("x", n+1)}))
	})
	s := peRun(t, 1, append(openaiArgs(home, busy), "--max-turns", "2", "write n.txt")...)
	if s.Status != "stopped" || s.Termination != "budget_turns" {
		t.Fatalf("status %s, termination %s", s.Status, s.Termination)
	}
	id := filepath.Base(s.RunDir)
	done := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn { return calls(finish("n.txt written")) })
	code, out, errOut := cli(t, "resume", "--home", home, "--base-url", done.URL, "--budget", "turns=+1", "--json", "--quiet", id)
	if code != 0 {
		t.Fatalf("resume --budget: exit %d\n%s\n%s", code, out, errOut)
	}
	if r := decodeSummary(t, out); r.Termination != "completed" || r.Status != "completed" {
		t.Fatalf("resumed run: %s %s", r.Status, r.Termination)
	}
	evs := runtest.Events(t, s.RunDir)
	fin := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
	if len(fin) != 2 || fin[0].Status != "stopped" || fin[1].Status != "completed" {
		t.Fatalf("run_finished events %+v", fin)
	}
	if r := decodeAll[record.Resumed](t, evs, record.TypeResumed); len(r) != 1 || !strings.Contains(r[0].Reason, "budget_turns") {
		t.Fatalf("resumed %+v", r)
	}
	if code, out, errOut := cli(t, "replay", "--home", home, id); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("replay of a run stopped by its budget and resumed: exit %d\n%s\n%s", code, out, errOut)
	}
}
