package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
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
