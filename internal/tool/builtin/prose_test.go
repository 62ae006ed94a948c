package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
)

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
					for _, tl := range append(append(Tools(env), EvidenceTools(ev)...), tool.FinishTool{}) {
						for where, text := range descriptions(tl) {
							seen++
							if err := tool.CheckProse(text); err != nil {
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
func descriptions(tl tool.Tool) map[string]string {
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
