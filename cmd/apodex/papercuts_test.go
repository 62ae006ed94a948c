package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/tool"
)

// `apodex run -` reads the objective from standard input (it used to be
// the objective "-"); an empty standard input is a usage error.
func TestRunObjectiveFromStdin(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("ok"))))
	home := t.TempDir()
	code, out, errOut := cliIn(t, "Sum the numbers\nin /inputs/data.csv\n", append(openaiArgs(home, srv), "--quiet", "--json", "-")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	var user string
	for _, m := range reqs[0].Messages {
		if m.Role == "user" {
			user += m.Content
		}
	}
	if !strings.Contains(user, "Sum the numbers\nin /inputs/data.csv") {
		t.Errorf("the model was not given the objective from standard input:\n%s", user)
	}
	proofreadTools(t, srv)
	code, _, errOut = cliIn(t, "  \n", append(openaiArgs(home, srv), "--quiet", "-")...)
	if code != 2 || !strings.Contains(errOut, "standard input held no objective") {
		t.Errorf("empty standard input: exit %d %s", code, errOut)
	}
}

// --home, --profile and --log-level may come before the command; any other
// flag there, or a global flag the command does not take, is exit 2
// naming what to do.
func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("ok"))))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	id := decodeSummary(t, out).RunID
	for _, args := range [][]string{
		{"--home", home, "log", id},
		{"--home=" + home, "log", id},
		{"--home", home, "runs"},
		{"--home", home, "show", "latest"},
	} {
		code, out, errOut := cli(t, args...)
		if code != 0 || !strings.Contains(out, id) && !strings.Contains(out, "assistant") && !strings.Contains(out, "finished") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if code, out, errOut := cli(t, "--home", home, "worlds", "list"); code != 0 || !strings.Contains(out, "no worlds") {
		t.Errorf("worlds list after --home: exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(filepath.Join(home, "config.toml"), []byte("[profiles.fast]\nmax_turns = 3\n"), 0o644)
	code, out, errOut = cli(t, "--home", home, "--profile", "fast", "config", "show")
	if code != 0 || !regexpLine(out, `^max_turns\s+3\s+profile fast`) {
		t.Errorf("config show after --profile: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"--log-level", "debug", "log", id}, "--log-level does not apply to `apodex log` (it does to: run, resume"},
		{[]string{"--json", "runs"}, "--json before the command: only --home, --profile and --log-level"},
		{[]string{"--home", home, "--json", "runs"}, "--json before the command"},
		{[]string{"--home"}, "--home needs a value"},
	} {
		code, out, errOut := cli(t, c.args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", c.args, code, out)
		}
		oneLineMessage(t, errOut, c.hint)
	}
}

// proofreadTools checks the description of every tool the server was
// offered, and of every argument at any depth, with tool.CheckProse: what
// every model reads must not be garbled ("…is not.. There is no network.
// in the sandbox").
func proofreadTools(t *testing.T, srv *llmtest.Server) {
	t.Helper()
	seen := map[string]bool{}
	for _, req := range srv.Requests() {
		for _, tl := range req.Tools {
			if seen[tl.Name+"\x00"+tl.Description+"\x00"+string(tl.Parameters)] {
				continue
			}
			seen[tl.Name+"\x00"+tl.Description+"\x00"+string(tl.Parameters)] = true
			if err := tool.CheckProse(tl.Description); err != nil {
				t.Errorf("tool %s: %v\n%s", tl.Name, err, tl.Description)
			}
			var schema any
			json.Unmarshal(tl.Parameters, &schema)
			for where, d := range schemaDescriptions(tl.Name, schema) {
				if err := tool.CheckProse(d); err != nil {
					t.Errorf("%s: %v\n%s", where, err, d)
				}
			}
		}
	}
	if len(seen) == 0 {
		t.Error("no tool was offered")
	}
}

// schemaDescriptions are the "description" strings of a JSON schema, by
// their path.
func schemaDescriptions(at string, v any) map[string]string {
	out := map[string]string{}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && k == "description" {
				out[at] = s
				continue
			}
			for p, d := range schemaDescriptions(at+"."+k, c) {
				out[p] = d
			}
		}
	case []any:
		for i, c := range x {
			for p, d := range schemaDescriptions(fmt.Sprintf("%s[%d]", at, i), c) {
				out[p] = d
			}
		}
	}
	return out
}
