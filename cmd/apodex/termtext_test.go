package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
)

// hostile is what a model, a command or a file name may carry to take over
// the operator's terminal (F11): a title change, a screen clear, a
// clipboard write (OSC 52) and a forged end line after a carriage return.
const hostile = "\x1b]0;pwned\x07 \x1b[2J \x1b]52;c;cHduZWQ=\x07\r finished: completed \u202eevil \u009b2J"

// The escaped forms people see instead.
var hostileShown = []string{`\x1b]0;pwned\x07`, `\x1b[2J`, `\x1b]52;c;cHduZWQ=\x07`, `\u202eevil`, `\u009b2J`}

// rawControls fails when out holds a byte a terminal acts on: a C0 control
// other than LF and tab (a CR only before LF), DEL, a C1 control or a bidi
// override.
func rawControls(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		bad := (r < 0x20 && r != '\n' && r != '\t' && !(r == '\r' && strings.HasPrefix(out[i:], "\r\n"))) ||
			r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
		if bad {
			t.Errorf("%s prints %U raw at byte %d:\n%q", what, r, i, out)
			return
		}
	}
	for _, l := range strings.Split(out, "\n") { // an indented line is a continuation
		if strings.HasPrefix(l, "finished: completed") {
			t.Errorf("%s prints a forged end line: %q", what, l)
		}
	}
}

// A run whose objective, model text, command output and file name carry
// terminal control sequences: progress, log, show, runs, board, evidence and
// claims print them escaped; --json keeps them exactly.
func TestHostileTextIsEscaped(t *testing.T) {
	home := t.TempDir()
	name := "/workspace/f" + strings.ReplaceAll(hostile, "/", "") + ".txt"
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		llmtest.Turn{Content: "thinking " + hostile, Calls: []llm.ToolCall{
			bash(`printf 'out \033]0;pwned\007 \033[2J \033]52;c;cHduZWQ=\007\r finished: completed\n'`),
			call("write_file", map[string]any{"path": name, "content": hostile}),
		}},
		calls(finish("done "+hostile))))
	code, _, progress := cli(t, append(openaiArgs(home, srv), "--verbose", "--sandbox", "none", "objective "+hostile)...)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, progress)
	}
	id := "latest"
	outputs := map[string]string{"run's progress": progress}
	for _, args := range [][]string{
		{"log", id}, {"log", "--full", id}, {"show", id}, {"show", "--artifacts", id},
		{"runs"}, {"board", id}, {"evidence", id}, {"claims", id},
	} {
		code, out, errOut := cli(t, append([]string{args[0], "--home", home}, args[1:]...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		outputs[strings.Join(args, " ")] = out + errOut
	}
	// An error message that quotes what it was given.
	_, _, outputs["an error quoting its argument"] = cli(t, "show", "--home", home, "run\x1b]0;pwned\x07\rfinished: completed")
	for what, out := range outputs {
		rawControls(t, what, out)
	}
	// runs shows only the objective, whose controls the run already dropped.
	for _, what := range []string{"run's progress", "log latest", "log --full latest", "show latest", "show --artifacts latest"} {
		for _, want := range hostileShown[:1] {
			if !strings.Contains(outputs[what], want) {
				t.Errorf("%s does not show %s escaped:\n%s", what, want, outputs[what])
			}
		}
	}
	for _, what := range []string{"run's progress", "log latest"} {
		for _, want := range append(hostileShown, `\r finished: completed`) {
			if !strings.Contains(outputs[what], want) {
				t.Errorf("%s does not show %s escaped:\n%s", what, want, outputs[what])
			}
		}
	}
	// --json and exports stay exact — the model's text decodes to what it
	// sent — and print nothing a terminal acts on (encoding/json leaves C1
	// and bidi controls raw: they are \u-escaped).
	for _, args := range [][]string{{"log", "--json", id}, {"show", "--json", id}, {"export", "--format", "chat", id}, {"export", "--format", "atif", id}} {
		code, out, errOut := cli(t, append([]string{args[0], "--home", home}, args[1:]...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		rawControls(t, strings.Join(args, " "), out)
		if args[0] == "export" && !strings.Contains(out, `\u009b2J`) {
			t.Errorf("%v does not carry the model's text:\n%s", args, out)
		}
	}
	_, js, _ := cli(t, "log", "--home", home, "--json", id)
	found := false
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var x struct{ Kind, Text string }
		if json.Unmarshal([]byte(line), &x) == nil && x.Kind == "assistant" && x.Text == "thinking "+hostile {
			found = true
		}
	}
	if !found {
		t.Errorf("log --json does not keep the model's text exactly:\n%s", js)
	}
}
