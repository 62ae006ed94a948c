package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/inbox"
)

// `apodex help CMD` prints exactly what `apodex CMD --help` prints, for
// every command in the table.
func TestHelpCommandMatchesFlagHelp(t *testing.T) {
	for _, c := range commands() {
		if c.name == "help" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			code1, out1, err1 := cli(t, "help", c.name)
			code2, out2, err2 := cli(t, c.name, "--help")
			if code1 != 0 || code2 != 0 {
				t.Fatalf("exit %d and %d\n%s%s", code1, code2, err1, err2)
			}
			if out1 != out2 || !strings.Contains(out1, "Usage: apodex "+c.name) {
				t.Errorf("help %s:\n%s\n--help:\n%s", c.name, out1, out2)
			}
		})
	}
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help", "help"}} {
		if code, out, errOut := cli(t, args...); code != 0 || !strings.Contains(out, "Usage: apodex help COMMAND") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if code, _, errOut := cli(t, "help", "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("help of an unknown command: exit %d %s", code, errOut)
	}
}

// Every command's help names each flag as --name and its value's form
// (DIR, N, a|b|c), never a phrase the flag package took from a quoted
// `apodex worlds list` in the usage ("-world apodex worlds list").
func TestHelpFlagLines(t *testing.T) {
	line := regexp.MustCompile(`^  --[a-z][a-z0-9-]*( (\[host\]|[A-Z][A-Z:=_|]*|[a-z0-9_-]+(\|[a-z0-9_-]+)*))?$`)
	for _, c := range commands() {
		_, out, _ := cli(t, c.name, "--help")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  -") && !line.MatchString(l) {
				t.Errorf("apodex %s --help: flag line %q", c.name, l)
			}
		}
		if strings.Contains(out, "\n  -world") || strings.Contains(out, "--world apodex") {
			t.Errorf("apodex %s --help shows the usage's quoted phrase as a placeholder:\n%s", c.name, out)
		}
	}
	_, out, _ := cli(t, "run", "--help")
	for _, want := range []string{"  --world WORLD\n", "  --mode react|team\n", "  --scratch-quota SIZE\n", "  --network [host]\n", "(default 2m)"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}

// A bad flag or a bad value is one line on stderr, nothing on stdout,
// exit 2; the line names the expected form.
func TestBadFlagsAreOneLine(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		args  []string
		hints []string
	}{
		{[]string{"run", "--bogus", "x"}, []string{"-bogus", "apodex run --help"}},
		{[]string{"run", "--timeout", "5", "x"}, []string{"-timeout", "5m"}},
		{[]string{"run", "--scratch-quota", "lots", "x"}, []string{"-scratch-quota", "256MiB"}},
		{[]string{"run", "--scratch-quota", "5", "x"}, []string{"-scratch-quota", "4096B"}},
		{[]string{"show", "--nope", "latest"}, []string{"-nope"}},
		{[]string{"runs", "--status", "sleeping"}, []string{"running, stopped, completed, failed or awaiting_review"}},
		{[]string{"run", "--quiet", "--verbose", "--provider", "scripted", "x"}, []string{"--quiet and --verbose"}},
		{[]string{"run", "--log-level", "chatty", "x"}, []string{"debug, info, warn or error"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := cli(t, append(c.args, "--home", home)...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q", code, out)
			}
			oneLineMessage(t, errOut, c.hints...)
		})
	}
}

// A provider that cannot work is a configuration error (exit 2) before the
// run starts: nothing is created under home.
func TestEarlyConfigurationErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("APODEX_MODEL", "")
	home := t.TempDir()
	cases := []struct {
		args  []string
		hints []string
	}{
		{[]string{"--provider", "openai"}, []string{"OPENAI_API_KEY", "--base-url"}},
		{[]string{"--provider", "openai", "--base-url", "http://127.0.0.1:9/v1"}, []string{"--model"}},
		{[]string{"--provider", "anthropic"}, []string{"ANTHROPIC_API_KEY"}},
		{nil, []string{"--provider"}},
	}
	for _, c := range cases {
		args := append(append([]string{"run", "--home", home}, c.args...), "do it")
		code, out, errOut := cli(t, args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", c.args, code, out)
		}
		oneLineMessage(t, errOut, c.hints...)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "runs")); len(entries) > 0 {
		t.Errorf("a run directory was created: %v", entries)
	}
}

// --task with an objective argument is refused unless asked for.
func TestTaskObjectiveOverride(t *testing.T) {
	home := t.TempDir()
	args := []string{"run", "--home", home, "--provider", "scripted", "--script", "../../examples/csv-sum/script.json",
		"--task", "../../examples/csv-sum/task.yaml", "--quiet", "--json", "--sandbox", "none"}
	code, out, errOut := cli(t, append(args, "Do something else")...)
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	oneLineMessage(t, errOut, "--objective-override")
	code, out, errOut = cli(t, append(args, "--objective-override", "Sum the value column and report it.")...)
	if code == 2 {
		t.Fatalf("with --objective-override: exit 2 %s", errOut)
	}
	info, err := loadInfo(decodeSummary(t, out).RunDir)
	if err != nil || info.Objective != "Sum the value column and report it." {
		t.Errorf("objective %q, %v", info.Objective, err)
	}
}

// `latest` works wherever a run id does; a killed run is listed as
// stopped; --status and --limit filter.
func TestLatestStoppedAndFilters(t *testing.T) {
	home, id := csvDemo(t)
	code, out, _ := cli(t, "show", "--home", home, "latest")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("show latest: exit %d\n%s", code, out)
	}
	// A second run whose process "died": its record lacks run_finished and
	// nobody holds its live lock.
	dead := filepath.Join(home, "runs", "29991231-235959-dead00")
	copyRunWithoutEnd(t, filepath.Join(home, "runs", id), dead)
	code, out, _ = cli(t, "runs", "--home", home)
	if code != 0 || !regexpLine(out, `29991231-235959-dead00\s+stopped`) || !regexpLine(out, id+`\s+completed`) {
		t.Errorf("runs:\n%s", out)
	}
	code, out, _ = cli(t, "runs", "--home", home, "--status", "stopped")
	if code != 0 || !strings.Contains(out, "dead00") || strings.Contains(out, id) {
		t.Errorf("runs --status stopped:\n%s", out)
	}
	code, out, _ = cli(t, "runs", "--home", home, "--limit", "1")
	if code != 0 || !strings.Contains(out, "dead00") || strings.Contains(out, id) {
		t.Errorf("runs --limit 1:\n%s", out)
	}
	code, out, _ = cli(t, "status", "--home", home, "latest")
	if code != 0 || !strings.Contains(out, "stopped") || strings.Contains(out, "map[") {
		t.Errorf("status latest:\n%s", out)
	}
	if code, _, errOut := cli(t, "show", "--home", t.TempDir(), "latest"); code != 2 || !strings.Contains(errOut, "no runs") {
		t.Errorf("latest with no runs: exit %d %s", code, errOut)
	}
}

func copyRunWithoutEnd(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(from, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "events.jsonl"), []byte(strings.Join(lines[:len(lines)-1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// regexpLine reports whether some line of s matches re.
func regexpLine(s, re string) bool {
	return regexp.MustCompile(`(?m)` + re).MatchString(s)
}

// The README's `say --budget turns=+10 deadline=+5m RUN` sends one control
// with both settings; a word that is neither is a usage error.
func TestSayBudgetSeveralPairs(t *testing.T) {
	home, id := csvDemo(t)
	dead := filepath.Join(home, "runs", "29991231-235959-dead00")
	copyRunWithoutEnd(t, filepath.Join(home, "runs", id), dead)
	code, out, errOut := cli(t, "say", "--home", home, "--budget", "turns=+10", "deadline=+5m", "29991231-235959-dead00")
	if code != 0 || !strings.Contains(out, "turns=+10 deadline=+5m") || !strings.Contains(errOut, "when it resumes") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	in, err := inbox.Open(dead)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := in.Controls()
	if err != nil || len(cmds) != 1 || cmds[0].Args["turns"] != "+10" || cmds[0].Args["deadline"] != "+5m" {
		t.Errorf("controls %+v %v", cmds, err)
	}
	code, _, errOut = cli(t, "say", "--home", home, "--budget", "turns=+10", "soon", "29991231-235959-dead00")
	if code != 2 || !strings.Contains(errOut, `"soon"`) {
		t.Errorf("a stray word: exit %d %s", code, errOut)
	}
	code, _, errOut = cli(t, "say", "--home", home, "--budget", "turns=+10", "colour=blue", "29991231-235959-dead00")
	if code != 2 || !strings.Contains(errOut, "turns, tool_calls, tokens, deadline or timeout") {
		t.Errorf("an unknown key: exit %d %s", code, errOut)
	}
}
