package runflags

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/run"
)

// ProjectInstructions reads the instructions a run quotes in its system
// prompt: the user's own (~/.config/apodex/AGENTS.md, or under
// $XDG_CONFIG_HOME), then the project's — AGENTS.md at the root of dir (the
// --repo tree, else the task file's directory), or CLAUDE.md when there is
// no AGENTS.md. A file that is absent is skipped; one that cannot be read
// is an error naming it.
func ProjectInstructions(dir string) ([]run.Instruction, error) {
	var out []run.Instruction
	if p := userInstructions(); p != "" {
		in, ok, err := readInstruction(p)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, in)
		}
	}
	if dir == "" {
		return out, nil
	}
	for _, name := range []string{"AGENTS.md", "CLAUDE.md"} {
		p, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		in, ok, err := readInstruction(p)
		if err != nil {
			return nil, err
		}
		if ok {
			return append(out, in), nil
		}
	}
	return out, nil
}

// userInstructions is the user's own instructions file ("" when there is
// no config directory).
func userInstructions() string {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(h, ".config")
	}
	return filepath.Join(base, "apodex", "AGENTS.md")
}

func readInstruction(p string) (run.Instruction, bool, error) {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return run.Instruction{}, false, nil
	case err != nil:
		return run.Instruction{}, false, fmt.Errorf("project instructions %s: %w (pass --no-project-instructions to skip them)", p, err)
	case !st.Mode().IsRegular():
		return run.Instruction{}, false, fmt.Errorf("project instructions %s: not a regular file (pass --no-project-instructions to skip them)", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return run.Instruction{}, false, fmt.Errorf("project instructions %s: %w (pass --no-project-instructions to skip them)", p, err)
	}
	return run.Instruction{Source: p, Text: string(b)}, true, nil
}
