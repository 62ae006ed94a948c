package team

import (
	_ "embed"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/tool"
)

// The prompts live in prompts/*.md so they can be read and revised as text.
var (
	//go:embed prompts/lead.md
	LeadPrompt string
	//go:embed prompts/planning.md
	planningNote string
	//go:embed prompts/subagent.md
	subagentTemplate string
)

// LeadSystem is the lead's system prompt for the tools it is given: its
// job, planning mode only when the run starts in it, the planes, how calls
// run and the tool list.
func (t *Team) LeadSystem(tools *tool.Set) string {
	var b strings.Builder
	b.WriteString(LeadPrompt + "\n")
	if t.cfg.Plan {
		b.WriteString(planningNote + "\n")
	}
	b.WriteString(agent.PlaneNotes(tools, "- /workspace: the shared working area, writable; subagents' changes are merged into it when they report. Relative paths are resolved here."))
	b.WriteString("\n" + agent.ToolNotes(tools))
	return b.String()
}

// subagentPrompt is a subagent's system prompt: its role, the planes as it
// sees them and the tools it is actually given. Its instructions are in
// its task message only.
func (t *Team) subagentPrompt(role string, tools *tool.Set) string {
	var b strings.Builder
	b.WriteString(strings.NewReplacer("{{role}}", role).Replace(subagentTemplate) + "\n")
	ws := "- /workspace: your private copy of the shared workspace, writable; your changes are merged into the shared one when you report. Relative paths are resolved here."
	if t.cfg.Isolation == Shared {
		ws = "- /workspace: shared with the other agents; your task message names the one directory you may write."
	}
	b.WriteString(agent.PlaneNotes(tools, ws))
	b.WriteString("\n" + agent.ToolNotes(tools))
	b.WriteString(t.cfg.ProjectInstructions)
	return b.String()
}
