package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// systemOf records the system prompt of every request srv answers.
type systemOf struct {
	mu      sync.Mutex
	prompts []string
}

func (s *systemOf) server(t *testing.T) *llmtest.Server {
	return llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range req.Messages {
			if m.Role == "system" {
				s.prompts = append(s.prompts, m.Content)
			}
		}
		return calls(finish("done"))
	})
}

func (s *systemOf) first(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.prompts) == 0 {
		t.Fatal("no system prompt reached the model")
	}
	return s.prompts[0]
}

func writeFile(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProjectInstructionsReachTheSystemPrompt(t *testing.T) {
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome)
	writeFile(t, filepath.Join(cfgHome, "apodex", "AGENTS.md"), "USER-LINE: answer in English.\n")
	project := t.TempDir()
	writeFile(t, filepath.Join(project, "task.yaml"), "objective: say hello\n")
	writeFile(t, filepath.Join(project, "CLAUDE.md"), "CLAUDE-LINE: not read when AGENTS.md is there\n")
	writeFile(t, filepath.Join(project, "AGENTS.md"), "AGENTS-LINE: run make test before finishing\n")

	t.Run("quoted and recorded", func(t *testing.T) {
		var sys systemOf
		home := t.TempDir()
		s := peRun(t, 0, append(openaiArgs(home, sys.server(t)), "--task", filepath.Join(project, "task.yaml"))...)
		p := sys.first(t)
		for _, want := range []string{"<project_instructions>", "USER-LINE: answer in English.", "AGENTS-LINE: run make test", filepath.Join(project, "AGENTS.md"), "</project_instructions>"} {
			if !strings.Contains(p, want) {
				t.Errorf("the system prompt lacks %q:\n%s", want, p)
			}
		}
		if strings.Contains(p, "CLAUDE-LINE") {
			t.Errorf("CLAUDE.md was quoted next to AGENTS.md")
		}
		if strings.Index(p, "USER-LINE") > strings.Index(p, "AGENTS-LINE") {
			t.Errorf("the project's instructions come before the user's own")
		}
		started := decodeAll[record.RunStarted](t, runtest.Events(t, s.RunDir), record.TypeRunStarted)
		ins := started[0].Settings.Instructions
		if len(ins) != 2 || ins[1].Source != filepath.Join(project, "AGENTS.md") {
			t.Fatalf("recorded instructions %+v", ins)
		}
		b, err := record.ReadBlob(s.RunDir, ins[1].Ref)
		if err != nil || !strings.Contains(string(b), "AGENTS-LINE") {
			t.Fatalf("blob %s: %q %v", ins[1].Ref, b, err)
		}
	})
	t.Run("CLAUDE.md without AGENTS.md", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "task.yaml"), "objective: say hello\n")
		writeFile(t, filepath.Join(dir, "CLAUDE.md"), "CLAUDE-LINE: be brief\n")
		var sys systemOf
		peRun(t, 0, append(openaiArgs(t.TempDir(), sys.server(t)), "--task", filepath.Join(dir, "task.yaml"))...)
		if p := sys.first(t); !strings.Contains(p, "CLAUDE-LINE: be brief") {
			t.Errorf("CLAUDE.md not quoted:\n%s", p)
		}
	})
	t.Run("turned off", func(t *testing.T) {
		var sys systemOf
		s := peRun(t, 0, append(openaiArgs(t.TempDir(), sys.server(t)), "--task", filepath.Join(project, "task.yaml"), "--no-project-instructions")...)
		if p := sys.first(t); strings.Contains(p, "project_instructions") || strings.Contains(p, "LINE") {
			t.Errorf("instructions quoted despite --no-project-instructions:\n%s", p)
		}
		started := decodeAll[record.RunStarted](t, runtest.Events(t, s.RunDir), record.TypeRunStarted)
		if n := len(started[0].Settings.Instructions); n != 0 {
			t.Errorf("%d instructions recorded", n)
		}
	})
}
