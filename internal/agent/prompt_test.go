package agent

import (
	"strings"
	"testing"
)

func TestSystemPromptFollowsTheTools(t *testing.T) {
	full := SystemPrompt([]string{"read_file", "bash", "claim_outputs", "finish", "recall"})
	for _, want := range []string{
		"Your tools: bash, claim_outputs, finish, read_file, recall.",
		"run concurrently", "in your next reply",
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
	bare := SystemPrompt([]string{"read_file", "finish"})
	if strings.Contains(bare, "Commands find ") || strings.Contains(bare, "claim_outputs") {
		t.Errorf("prompt names tools the agent lacks:\n%s", bare)
	}
	if !strings.Contains(bare, "read-only for you") {
		t.Errorf("an agent without claim_outputs is not told /outputs is read-only:\n%s", bare)
	}
}
