package main

import (
	"strings"
	"testing"
)

// Every command answers --help with its flags and exit 0; bare `apodex`
// is a usage error that still shows the usage.
func TestHelp(t *testing.T) {
	tests := []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"run", "--help"}, 0, []string{"apodex run", "-inputs", "-home", "-provider", "-base-url", "-model", "-max-turns", "-max-tool-calls", "-max-tokens", "-timeout", "-json", "-quiet", "-retries", "-sandbox", "-network"}},
		{[]string{"show", "--help"}, 0, []string{"apodex show", "-home", "-json"}},
		{[]string{"runs", "--help"}, 0, []string{"apodex runs", "-home", "-json"}},
		{[]string{"--help"}, 0, []string{"run", "runs", "show", "Exit codes"}},
		{nil, 2, []string{"Usage: apodex COMMAND", "run", "runs", "show"}},
		{[]string{"frobnicate"}, 2, []string{`unknown command "frobnicate"`, "--help"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := cli(t, tt.args...)
			all := out + errOut
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, all)
			}
			for _, w := range tt.wants {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestRunsAndShowErrors(t *testing.T) {
	home := t.TempDir()
	code, out, _ := cli(t, "runs", "--home", home)
	if code != 0 || !strings.Contains(out, "no runs") {
		t.Errorf("runs on an empty home: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "runs", "--home", home, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("runs --json on an empty home: exit %d %q", code, out)
	}
	code, _, errOut := cli(t, "show", "--home", home, "20990101-000000-abcdef")
	if code != 2 {
		t.Errorf("show of a missing run: exit %d, want 2 (a usage error)", code)
	}
	oneLineMessage(t, errOut, "20990101-000000-abcdef", "apodex runs")
	code, _, errOut = cli(t, "show", "--home", home)
	if code != 2 || !strings.Contains(errOut, "run id") {
		t.Errorf("show without a run: exit %d\n%s", code, errOut)
	}
	code, _, errOut = cli(t, "show", "--home", home, "../../etc")
	if code != 2 {
		t.Errorf("show ../../etc: exit %d\n%s", code, errOut)
	}
}
