package run

import (
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Instruction is one project instructions file (AGENTS.md, CLAUDE.md, the
// user's own) as the caller read it from the host.
type Instruction struct {
	Source string // the host file
	Text   string
}

// MaxInstructionBytes caps what the prompt quotes of one file; the rest is
// cut, and the cut says so.
const MaxInstructionBytes = 32 << 10

// storeInstructions keeps each text as a blob of the run, for run_started.
func storeInstructions(log *record.Log, ins []Instruction) ([]record.Instruction, error) {
	var out []record.Instruction
	for _, in := range ins {
		text := in.Text
		if len(text) > MaxInstructionBytes {
			text = text[:MaxInstructionBytes] + fmt.Sprintf("\n[cut: the file has %d bytes; the first %d are quoted]\n", len(in.Text), MaxInstructionBytes)
		}
		ref, err := log.PutBlob([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("run: keep the project instructions %s: %w", in.Source, err)
		}
		out = append(out, record.Instruction{Source: in.Source, Ref: ref})
	}
	return out, nil
}

// LoadInstructions reads the instructions a run recorded back from its
// blobs (a replay quotes them as the run did).
func LoadInstructions(dir string, set Settings) ([]Instruction, error) {
	var out []Instruction
	for _, r := range set.Instructions {
		b, err := record.ReadBlob(dir, r.Ref)
		if err != nil {
			return nil, fmt.Errorf("run: the project instructions %s: %w", r.Source, err)
		}
		out = append(out, Instruction{Source: r.Source, Text: string(b)})
	}
	return out, nil
}

// InstructionsSection is the marked section of the system prompt that
// quotes the project instructions ("" for none).
func InstructionsSection(ins []Instruction) string {
	if len(ins) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n<project_instructions>\n")
	b.WriteString("The user's instructions for this project, from the files named below. Follow them where they do not conflict with the task, the paths or the tools above.\n")
	for _, in := range ins {
		fmt.Fprintf(&b, "\n<file source=%q>\n%s", in.Source, in.Text)
		if !strings.HasSuffix(in.Text, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("</file>\n")
	}
	b.WriteString("</project_instructions>\n")
	return b.String()
}
