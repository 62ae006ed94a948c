package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/trajectory"
)

func TestPivotNamesTheStepWhereTheyParted(t *testing.T) {
	home := t.TempDir()
	good := fakeRun(t, home, 0, []string{"Count to three"},
		calls(bash("echo one")), calls(bash("echo two")), calls(bash("echo three")), calls(finish("counted")))
	failed := fakeRun(t, home, 1, []string{"--max-turns", "4", "Count to three"},
		calls(bash("echo one")), calls(llm.ToolCall{Name: "bash", Arguments: `{ "command" :  "echo two" }`}), calls(bash("echo five")), calls(bash("echo six")), calls(bash("echo seven")))
	// A second successful sibling that parted at once does not move the pivot.
	other := fakeRun(t, home, 0, []string{"Count to three"}, calls(bash("seq 3")), calls(finish("counted")))

	code, out, errOut := cli(t, "pivot", "--home", home, failed, "--siblings", good, other)
	if code != 0 {
		t.Fatalf("pivot: exit %d\n%s", code, errOut)
	}
	var p trajectory.Pivot
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Found || p.At == nil || p.At.Step != 3 || !strings.Contains(p.At.Arguments, "echo five") {
		t.Fatalf("pivot %+v, want step 3 (echo five)", p.At)
	}
	if len(p.Prefix) != 2 {
		t.Errorf("prefix %d steps, want 2 (the same call written with other JSON spacing is the same decision): %+v", len(p.Prefix), p.Prefix)
	}
	if len(p.Alternatives) != 1 || p.Alternatives[0].Run != good || !strings.Contains(p.Alternatives[0].Action.Arguments, "echo three") {
		t.Errorf("alternatives %+v, want %s's echo three", p.Alternatives, good)
	}
	// Without a successful sibling there is no pivot, and the error says what to give.
	code, _, errOut = cli(t, "pivot", "--home", home, good, "--siblings", failed)
	if code == 0 || !strings.Contains(errOut, "sibling") {
		t.Errorf("pivot against only a failed sibling: exit %d %s", code, errOut)
	}
}

func TestExportFollowStreamsAsRolloutsFinish(t *testing.T) {
	home := t.TempDir()
	a := fakeRun(t, home, 0, []string{"One"}, calls(finish("one")))
	b := fakeRun(t, home, 0, []string{"Two"}, calls(finish("two")))
	ed := filepath.Join(home, "evals", "e-test")
	os.MkdirAll(ed, 0o755)
	os.WriteFile(filepath.Join(ed, "plan.json"), []byte(`{"id":"e-test","worlds":[{"id":"w1"}],"configs":[{"name":"react"}],"rollouts":2}`), 0o644)
	line := func(run string, i int) string {
		return fmt.Sprintf(`{"world":"w1","config":"react","rollout":%d,"run_id":%q,"status":"completed","correctness":1}`+"\n", i, run)
	}
	results := filepath.Join(ed, "results.jsonl")
	os.WriteFile(results, []byte(line(a, 0)), 0o644)

	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		var errb bytes.Buffer
		done <- Run(context.Background(), []string{"export", "--home", home, "--metadata", "inline", "--follow", "e-test"}, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), a) {
		if time.Now().After(deadline) {
			t.Fatal("the finished rollout was not exported while the eval ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case code := <-done:
		t.Fatalf("export --follow ended (exit %d) before the eval did", code)
	default:
	}
	f, _ := os.OpenFile(results, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(line(b, 1)[:20]) // a half-written line is not read
	time.Sleep(150 * time.Millisecond)
	f.WriteString(line(b, 1)[20:])
	f.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("export --follow did not end when the eval's last rollout finished")
	}
	lines := checkChat(t, out.String())
	if len(lines) != 2 || lines[0].Metadata.Run != a || lines[1].Metadata.Run != b {
		t.Fatalf("want a's line then b's, got %d lines", len(lines))
	}
	var meta struct {
		Metadata struct {
			World  string         `json:"world"`
			Config string         `json:"config"`
			Scores map[string]any `json:"scores"`
		} `json:"metadata"`
	}
	json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &meta)
	if meta.Metadata.World != "w1" || meta.Metadata.Config != "react" || meta.Metadata.Scores["correctness"] != 1.0 {
		t.Errorf("metadata lacks the eval's world, config or scores: %+v", meta.Metadata)
	}
}
