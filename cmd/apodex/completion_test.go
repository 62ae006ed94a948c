package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionHome is a home with two runs, an eval and a world.
func completionHome(t *testing.T) (home string, runs []string, evalID, worldID string) {
	t.Helper()
	home = t.TempDir()
	runs = []string{"20260101-000000-aaaaaa", "20260102-000000-bbbbbb"}
	for _, id := range runs {
		os.MkdirAll(filepath.Join(home, "runs", id), 0o755)
	}
	evalID = "e-20260103-000000-cccccc"
	os.MkdirAll(filepath.Join(home, "evals", evalID), 0o755)
	worldID = genIDs(t, home, "file", "--seed", "1", "--level", "1")[0]
	return home, runs, evalID, worldID
}

// __complete gives commands, subcommands, flags, flag values, and the run,
// eval and world ids under the home the line names.
func TestCompleteCandidates(t *testing.T) {
	home, runs, evalID, worldID := completionHome(t)
	cases := []struct {
		words []string
		want  []string
	}{
		{[]string{"sh"}, []string{"show"}},
		{[]string{"--home", home, "sh"}, []string{"show"}},
		{[]string{"-"}, []string{"--home", "--profile", "--log-level", "--help", "--version"}},
		{[]string{"--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"show", "--home", home, ""}, []string{runs[1], runs[0], "latest"}},
		{[]string{"--home", home, "log", "2026010"}, []string{runs[1], runs[0]}},
		{[]string{"--home=" + home, "cancel", "20260101"}, []string{runs[0]}},
		{[]string{"export", "--home", home, "e-"}, []string{evalID}},
		{[]string{"eval", "show", "--home", home, ""}, []string{evalID}},
		{[]string{"worlds", "check", "--home", home, ""}, []string{worldID}},
		{[]string{"run", "--home", home, "--world", ""}, []string{worldID}},
		{[]string{"worlds", ""}, []string{"build", "list", "show", "check", "gen"}},
		{[]string{"eval", ""}, []string{"show", "resume", ":files"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"help", "lo"}, []string{"log"}},
		{[]string{"run", "--mo"}, []string{"--mode", "--model"}},
		{[]string{"run", "--mode", ""}, []string{"react", "team"}},
		{[]string{"run", "--mode=t"}, []string{"--mode=team"}},
		{[]string{"run", "--mode", "=", "t"}, []string{"team"}}, // bash splits at =
		{[]string{"run", "--sandbox", ""}, []string{"auto", "bwrap", "native", "none"}},
		{[]string{"resume", "--sandbox", ""}, []string{"none"}},
		{[]string{"export", "--format", ""}, []string{"chat", "atif", "native"}},
		{[]string{"run", "--task", ""}, []string{":files"}},
		{[]string{"run", "--inputs", "x"}, []string{":dirs"}},
		{[]string{"run", "--max-turns", ""}, nil},
	}
	for _, c := range cases {
		if got := completion().Words(c.words); !slices.Equal(got, c.want) {
			t.Errorf("complete %q = %q; want %q", c.words, got, c.want)
		}
	}
	code, out, _ := cli(t, "__complete", "--home", home, "show", "")
	if code != 0 || out != runs[1]+"\n"+runs[0]+"\nlatest\n" {
		t.Errorf("__complete: exit %d %q", code, out)
	}
	code, out, _ = cli(t, "--help")
	if code != 0 || strings.Contains(out, "__complete") {
		t.Error("apodex --help lists the completion helper")
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d %s\n%s", sh, code, errOut, out)
		}
	}
	if code, _, _ := cli(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

// TestCompleteChildProcess is the apodex binary for the shell tests: a
// wrapper script runs this test binary with the words after "--".
func TestCompleteChildProcess(t *testing.T) {
	if os.Getenv("APODEX_COMPLETE_CHILD") == "" {
		t.Skip("runs only as the child of the completion shell tests")
	}
	i := slices.Index(os.Args, "--")
	os.Exit(Run(t.Context(), os.Args[i+1:], os.Stdout, os.Stderr))
}

// The check from outside: `completion bash`, sourced in bash,
// completes a run id (and a command, and a flag's value).
func TestCompletionBashCompletesARunID(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	home, runs, _, _ := completionHome(t)
	dir := t.TempDir()
	apodex := filepath.Join(dir, "apodex")
	os.WriteFile(apodex, []byte("#!/bin/sh\nAPODEX_COMPLETE_CHILD=1 exec "+os.Args[0]+" -test.run='^TestCompleteChildProcess$' -- \"$@\"\n"), 0o755)
	_, script, _ := cli(t, "completion", "bash")
	os.WriteFile(filepath.Join(dir, "apodex.bash"), []byte(script), 0o644)
	completeIn := func(line ...string) []string {
		t.Helper()
		prog := "source " + filepath.Join(dir, "apodex.bash") + "\nCOMP_WORDS=(" + apodex
		for _, w := range line {
			prog += " '" + w + "'"
		}
		prog += ")\nCOMP_CWORD=" + strconv.Itoa(len(line)) + "\n_apodex\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	if got := completeIn("show", "--home", home, "20260102"); !slices.Equal(got, []string{runs[1]}) {
		t.Errorf("bash completes `apodex show --home H 20260102` to %q; want the run id %s", got, runs[1])
	}
	if got := completeIn("--home", home, "log", ""); !slices.Contains(got, runs[0]) || !slices.Contains(got, "latest") {
		t.Errorf("bash completes `apodex --home H log ` to %q", got)
	}
	if got := completeIn("sa"); !slices.Equal(got, []string{"say"}) {
		t.Errorf("bash completes `apodex sa` to %q", got)
	}
	if got := completeIn("run", "--isolation", ""); !slices.Equal(got, []string{"per-agent", "shared"}) {
		t.Errorf("bash completes `apodex run --isolation ` to %q", got)
	}
}

// The zsh and fish scripts complete a run id too, where those shells are
// installed (zsh through its completion function with compadd stubbed,
// fish through complete -C).
func TestCompletionZshAndFishCompleteARunID(t *testing.T) {
	home, runs, _, _ := completionHome(t)
	dir := t.TempDir()
	apodex := filepath.Join(dir, "apodex")
	os.WriteFile(apodex, []byte("#!/bin/sh\nAPODEX_COMPLETE_CHILD=1 exec "+os.Args[0]+" -test.run='^TestCompleteChildProcess$' -- \"$@\"\n"), 0o755)
	for _, sh := range []string{"zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			bin, err := exec.LookPath(sh)
			if err != nil {
				t.Skipf("no %s", sh)
			}
			_, script, _ := cli(t, "completion", sh)
			file := filepath.Join(dir, "apodex."+sh)
			os.WriteFile(file, []byte(script), 0o644)
			var prog string
			if sh == "zsh" {
				prog = "compdef(){ :; }; compadd(){ shift 2; print -l -- \"$@\"; }; source " + file +
					"; words=(apodex show --home " + home + " 20260102); CURRENT=5; _apodex"
			} else {
				prog = "source " + file + "; complete -C 'apodex show --home " + home + " 20260102'"
			}
			cmd := exec.Command(bin, "-c", prog)
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, []string{runs[1]}) {
				t.Errorf("%s completes `apodex show --home H 20260102` to %q (%v); want %s", sh, got, err, runs[1])
			}
		})
	}
}
