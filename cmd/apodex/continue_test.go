package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// TestContinueACompletedRun: continue delivers the follow-up to the
// finished coordinator as a contract revision, with its history and the
// workspace as they were; the record holds two segments, each with its
// run_finished; replay plays both.
func TestContinueACompletedRun(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	first := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			return calls(call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "one\n"}))
		}
		return calls(finish("a.txt written"))
	})
	s := peRun(t, 0, append(openaiArgs(home, first), "write a.txt")...)
	id := filepath.Base(s.RunDir)
	if code, _, errOut := cli(t, "continue", "--home", home, id); code != 2 {
		t.Fatalf("continue without a follow-up: exit %d: %s", code, errOut)
	}
	second := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			all := ""
			for _, m := range req.Messages {
				all += m.Content + "\n"
			}
			if !strings.Contains(all, "now also write b.txt") || !teamSeen(req, "/workspace/a.txt") {
				t.Errorf("the follow-up or the history did not reach the model: %+v", req.Messages)
			}
			return calls(bash("cat /workspace/a.txt > /workspace/b.txt && echo two >> /workspace/b.txt"))
		}
		return calls(finish("b.txt written"))
	})
	code, out, errOut := cli(t, "continue", "--home", home, "--base-url", second.URL, "--json", "--quiet", id, "now also write b.txt")
	if code != 0 {
		t.Fatalf("continue: exit %d\n%s\n%s", code, out, errOut)
	}
	if r := decodeSummary(t, out); r.Status != "completed" {
		t.Fatalf("continued run: %s %s %s", r.Status, r.Termination, r.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(s.RunDir, "workspace", "b.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("b.txt is %q", b)
	}
	evs := runtest.Events(t, s.RunDir)
	if fin := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished); len(fin) != 2 || fin[1].Summary != "b.txt written" {
		t.Fatalf("run_finished %+v", fin)
	}
	if r := decodeAll[record.Resumed](t, evs, record.TypeResumed); len(r) != 1 || r[0].FollowUp != "now also write b.txt" {
		t.Fatalf("resumed %+v", r)
	}
	if c := decodeAll[record.Contract](t, evs, record.TypeContract); len(c) != 2 || c[1].Text != "now also write b.txt" {
		t.Fatalf("contracts %+v", c)
	}
	code, out, errOut = cli(t, "show", "--home", home, id)
	if code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "replay", "--home", home, id)
	if code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("replay of a continued run: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "export", "--home", home, "--format", "chat", id)
	if code != 0 || !strings.Contains(out, "now also write b.txt") {
		t.Fatalf("export of a continued run: exit %d\n%.2000s\n%s", code, out, errOut)
	}
}

// TestContinueATeamRun: the finished lead takes the follow-up, and the
// continued team run replays identical.
func TestContinueATeamRun(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	first := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn { return calls(finish("said hi")) })
	s := peRun(t, 0, append(openaiArgs(home, first), "--mode", "team", "--effort", "off", "--synthesis", "off", "say hi")...)
	id := filepath.Base(s.RunDir)
	second := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		all := ""
		for _, m := range req.Messages {
			all += m.Content + "\n"
		}
		if !strings.Contains(all, "and say bye") || !strings.Contains(all, "say hi\n") {
			t.Errorf("the lead did not get the follow-up with its history: %+v", req.Messages)
		}
		return calls(finish("said bye"))
	})
	code, out, errOut := cli(t, "continue", "--home", home, "--base-url", second.URL, "--json", "--quiet", id, "and say bye")
	if code != 0 || decodeSummary(t, out).Summary != "said bye" {
		t.Fatalf("continue: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := cli(t, "replay", "--home", home, id); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("replay of a continued team run: exit %d\n%s\n%s", code, out, errOut)
	}
}
