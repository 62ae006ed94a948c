package agent

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/tool"
)

// set makes a tool set of fakes by name; claim_outputs is serial, as the
// real one is.
func set(names ...string) *tool.Set {
	var ts []tool.Tool
	for _, n := range names {
		var t tool.Tool = echo(n)
		if n == "claim_outputs" {
			t = tool.Serial(t)
		}
		ts = append(ts, t)
	}
	return tool.NewSet(ts...)
}

func TestSystemPromptFollowsTheTools(t *testing.T) {
	full := SystemPrompt(set("read_file", "bash", "claim_outputs", "finish", "recall"))
	for _, want := range []string{
		"Your tools: bash, claim_outputs, finish, read_file, recall.",
		"run concurrently", "in your next reply", "claim_outputs calls are applied in call order",
		"first call claim_outputs with their exact paths",
		"Commands find ", // what the sandbox offers
	} {
		if !strings.Contains(full, want) {
			t.Errorf("prompt lacks %q:\n%s", want, full)
		}
	}
	if strings.Contains(full, "read-only for you") {
		t.Errorf("an agent with claim_outputs is told /outputs is read-only:\n%s", full)
	}
	bare := SystemPrompt(set("read_file", "finish"))
	if strings.Contains(bare, "Commands find ") || strings.Contains(bare, "claim_outputs") {
		t.Errorf("prompt names tools the agent lacks:\n%s", bare)
	}
	if !strings.Contains(bare, "read-only for you") {
		t.Errorf("an agent without claim_outputs is not told /outputs is read-only:\n%s", bare)
	}
}
