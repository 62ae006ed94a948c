package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
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

// Every description of every tool of this package, and of each argument,
// reads as sentences, in every configuration that changes them: with and
// without a sandbox, a network, a publishing lease and a corpus.
func TestToolDescriptionsReadRight(t *testing.T) {
	seen := 0
	for _, network := range []bool{false, true} {
		for _, runner := range []sandbox.Runner{&fakeRunner{}, sandbox.None{}} {
			for _, publishing := range []bool{false, true} {
				for _, withCorpus := range []bool{false, true} {
					env, ev, _ := evidenceEnv(t)
					env.Runner, env.Network = runner, network
					ev.Network = network
					if !withCorpus {
						ev.Corpus = nil
					}
					if publishing {
						env.Outputs = func(ctx context.Context) (OutputsView, error) { return OutputsView{}, nil }
					}
					for _, tl := range append(append(Builtins(env), EvidenceTools(ev)...), FinishTool{}) {
						for where, text := range descriptions(tl) {
							seen++
							if err := CheckProse(text); err != nil {
								t.Errorf("%s (network %v, %s, publishing %v, corpus %v): %v\n%s", where, network, sandbox.KindOf(runner), publishing, withCorpus, err, text)
							}
						}
					}
				}
			}
		}
	}
	if seen < 100 {
		t.Errorf("only %d descriptions checked", seen)
	}
}

// descriptions are a tool's description and each argument's, by where
// they stand ("bash", "bash.command").
func descriptions(tl Tool) map[string]string {
	s := tl.Spec()
	out := map[string]string{s.Name: s.Description}
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	json.Unmarshal(s.Parameters, &schema)
	for k, p := range schema.Properties {
		out[fmt.Sprintf("%s.%s", s.Name, k)] = p.Description
	}
	return out
}
