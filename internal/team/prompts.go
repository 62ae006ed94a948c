package team

import (
	_ "embed"
	"strings"
)

// The prompts live in prompts/*.md so they can be read and revised as text.
var (
	//go:embed prompts/lead.md
	LeadPrompt string
	//go:embed prompts/subagent.md
	subagentTemplate string
	//go:embed prompts/verifier.md
	verifierPrompt string
)

func subagentPrompt(role, instructions string) string {
	return strings.NewReplacer("{{role}}", role, "{{instructions}}", instructions).Replace(subagentTemplate)
}
