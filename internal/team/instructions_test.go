package team

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/tool"
)

// TestSubagentPromptEndsWithTheProjectInstructions: the run's marked
// section of project instructions reaches every subagent's prompt.
func TestSubagentPromptEndsWithTheProjectInstructions(t *testing.T) {
	sec := "\n<project_instructions>\nAGENTS-LINE\n</project_instructions>\n"
	p := (&Team{cfg: Config{ProjectInstructions: sec}}).subagentPrompt("summer", tool.NewSet())
	if !strings.HasSuffix(p, sec) {
		t.Fatalf("the subagent prompt does not end with the section:\n%s", p)
	}
	if p := (&Team{}).subagentPrompt("summer", tool.NewSet()); strings.Contains(p, "project_instructions") {
		t.Fatalf("a section without instructions:\n%s", p)
	}
}
