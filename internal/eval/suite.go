package eval

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// Suite is a suite file: which worlds, which configurations, how many
// rollouts of each pair.
type Suite struct {
	Name     string `yaml:"name" json:"name"`
	Rollouts int    `yaml:"rollouts" json:"rollouts"`
	// MaxAttempts: tries of a rollout that fails to run, on a queue
	// (apodex eval --nats); default 2.
	MaxAttempts int        `yaml:"max_attempts,omitempty" json:"max_attempts,omitempty"`
	Worlds      []WorldRef `yaml:"worlds" json:"worlds"`
	Configs     []Config   `yaml:"configs" json:"configs"`
	BaseDir     string     `yaml:"-" json:"-"`
}

// WorldRef names worlds by stored id, by a directory to build, or by a
// generator spec (count worlds from seed on).
type WorldRef struct {
	ID  string   `yaml:"id,omitempty" json:"id,omitempty"`
	Dir string   `yaml:"dir,omitempty" json:"dir,omitempty"`
	Gen *GenSpec `yaml:"gen,omitempty" json:"gen,omitempty"`
}

// GenSpec is a generator spec in a suite.
type GenSpec struct {
	Family string `yaml:"family" json:"family"`
	Seed   int64  `yaml:"seed" json:"seed"`
	Level  int    `yaml:"level" json:"level"`
	Count  int    `yaml:"count,omitempty" json:"count,omitempty"`
}

// Config is one configuration under comparison.
type Config struct {
	Name     string `yaml:"name" json:"name"`
	Mode     string `yaml:"mode,omitempty" json:"mode,omitempty"` // react (default) or team
	Provider string `yaml:"provider,omitempty" json:"provider,omitempty"`
	Model    string `yaml:"model,omitempty" json:"model,omitempty"`
	BaseURL  string `yaml:"base_url,omitempty" json:"base_url,omitempty"`
	Script   string `yaml:"script,omitempty" json:"script,omitempty"`
	// Effort is recorded with the results; no model client takes a
	// reasoning-effort setting yet.
	Effort        string         `yaml:"effort,omitempty" json:"effort,omitempty"`
	Budget        Budget         `yaml:"budget,omitempty" json:"budget,omitempty"`
	Interventions []Intervention `yaml:"interventions,omitempty" json:"interventions,omitempty"`
}

// Budget overrides the world's budget for a configuration; zero keeps it.
type Budget struct {
	Turns     int           `yaml:"turns,omitempty" json:"turns,omitempty"`
	ToolCalls int           `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	Tokens    int           `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	Timeout   time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Intervention is a scripted user message, sent once the run's main agent
// (or lead) has finished AfterTurns model turns. Expect ties it to the
// outcome: it counts as reflected when the terminal file Expect.Path holds
// Expect.Contains.
type Intervention struct {
	AfterTurns int    `yaml:"after_turns" json:"after_turns"`
	Text       string `yaml:"text" json:"text"`
	Expect     Expect `yaml:"expect" json:"expect"`
}

// Expect is the clause an intervention is judged by.
type Expect struct {
	Path     string `yaml:"path" json:"path"` // /outputs/… or /workspace/…
	Contains string `yaml:"contains" json:"contains"`
}

// LoadSuite reads and checks a suite file; relative dirs and scripts
// resolve against its directory.
func LoadSuite(path string) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %v; pass a suite file (see examples/suite/suite.yaml)", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	s := &Suite{}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("eval: %s: %v", path, err)
	}
	abs, _ := filepath.Abs(path)
	s.BaseDir = filepath.Dir(abs)
	return s, s.check(path)
}

func (s *Suite) check(path string) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("eval: %s: "+format, append([]any{path}, a...)...))
	}
	if s.Rollouts == 0 {
		s.Rollouts = 1
	}
	if s.MaxAttempts < 0 {
		bad("max_attempts must be ≥ 1")
	}
	if s.Rollouts < 0 {
		bad("rollouts must be ≥ 1")
	}
	if len(s.Worlds) == 0 {
		bad("no worlds: list some under worlds: (id:, dir: or gen:)")
	}
	for i, w := range s.Worlds {
		n := 0
		for _, set := range []bool{w.ID != "", w.Dir != "", w.Gen != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			bad("worlds[%d]: give exactly one of id, dir, gen", i)
		}
		if w.Gen != nil && (w.Gen.Level < 1 || w.Gen.Level > 5 || w.Gen.Count < 0) {
			bad("worlds[%d].gen: level 1 to 5, count ≥ 0", i)
		}
		if w.Dir != "" && !filepath.IsAbs(w.Dir) {
			s.Worlds[i].Dir = filepath.Join(s.BaseDir, w.Dir)
		}
	}
	if len(s.Configs) == 0 {
		bad("no configs: list at least one under configs: (name, mode, provider, …)")
	}
	seen := map[string]bool{}
	for i, c := range s.Configs {
		switch {
		case c.Name == "":
			bad("configs[%d] has no name", i)
		case seen[c.Name]:
			bad("configs[%d]: name %q is used twice", i, c.Name)
		case c.Mode != "" && c.Mode != "react" && c.Mode != "team":
			bad("configs[%d].mode %q: use react or team", i, c.Mode)
		}
		seen[c.Name] = true
		if c.Script != "" && !filepath.IsAbs(c.Script) {
			s.Configs[i].Script = filepath.Join(s.BaseDir, c.Script)
		}
		for j, iv := range c.Interventions {
			if iv.AfterTurns < 1 || iv.Text == "" || iv.Expect.Path == "" {
				bad("configs[%d].interventions[%d]: needs after_turns ≥ 1, text and expect.path", i, j)
			}
		}
	}
	return errors.Join(errs...)
}
