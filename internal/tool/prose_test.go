package tool

import (
	"testing"
)

func TestCheckProse(t *testing.T) {
	for _, bad := range []string{
		// The bash description every model got (issue #28).
		"Run a shell command (/bin/sh -c) /inputs and /outputs are read-only there; /tmp does not persist.. There is no network. in the sandbox, in /workspace Returns the exit code.",
		"Reads a file,, then stops.",
		"Reads a file ; then stops.",
		"Reads a file. then stops.",
		"reads a file.",
		"Reads a file",
		"Reads  a file.",
		"Reads `a file.",
	} {
		if CheckProse(bad) == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	for _, good := range []string{
		"Lists entries. .git and node_modules are not entered.",
		"Binary files, .git and node_modules are skipped.",
		"Paths that escape, e.g. ../x, are refused. bash runs in /workspace.",
		"Matched against each line, e.g. def \\w+\\( or (?i)total.",
		"Ends the run (once the work is done).",
		"Waits... then returns.",
	} {
		if err := CheckProse(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}
