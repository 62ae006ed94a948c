package export

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/trajectory"
	"github.com/apodex/apodex/internal/version"
)

// LayoutHarbor writes each run as a Harbor trial directory.
const LayoutHarbor = "harbor"

// harborTrialConfig is the part of Harbor's TrialConfig
// (harbor.models.trial.config) a trial of Apodex has; the rest defaults.
type harborTrialConfig struct {
	Task      harborTask  `json:"task"`
	TrialName string      `json:"trial_name"`
	TrialsDir string      `json:"trials_dir"`
	Agent     harborAgent `json:"agent"`
}

type harborTask struct {
	Path string `json:"path"`
}

type harborAgent struct {
	Name      string `json:"name"`
	ModelName string `json:"model_name,omitempty"`
}

// harborTrialResult follows Harbor's TrialResult
// (harbor.models.trial.result): the required fields, the agent's token
// counts (AgentContext) and the verifier's reward.
type harborTrialResult struct {
	ID             string            `json:"id"`
	TaskName       string            `json:"task_name"`
	TrialName      string            `json:"trial_name"`
	TrialURI       string            `json:"trial_uri"`
	TaskID         harborTask        `json:"task_id"`
	TaskChecksum   string            `json:"task_checksum"`
	Config         harborTrialConfig `json:"config"`
	AgentInfo      harborAgentInfo   `json:"agent_info"`
	AgentResult    harborContext     `json:"agent_result"`
	VerifierResult *harborVerifier   `json:"verifier_result"`
	ExceptionInfo  *harborException  `json:"exception_info"`
	StartedAt      string            `json:"started_at,omitempty"`
	FinishedAt     string            `json:"finished_at,omitempty"`
}

type harborAgentInfo struct {
	Name      string           `json:"name"`
	Version   string           `json:"version"`
	ModelInfo *harborModelInfo `json:"model_info,omitempty"`
}

type harborModelInfo struct {
	Name     string `json:"name"`
	Provider string `json:"provider,omitempty"`
}

// harborContext is Harbor's AgentContext: n_input_tokens counts cached
// input too, n_cache_tokens the cached part.
type harborContext struct {
	NInputTokens  int            `json:"n_input_tokens"`
	NCacheTokens  int            `json:"n_cache_tokens"`
	NOutputTokens int            `json:"n_output_tokens"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

type harborVerifier struct {
	Rewards map[string]float64 `json:"rewards"`
}

type harborException struct {
	ExceptionType      string `json:"exception_type"`
	ExceptionMessage   string `json:"exception_message"`
	ExceptionTraceback string `json:"exception_traceback"`
	OccurredAt         string `json:"occurred_at"`
}

// writeTrial writes the run as the trial directory dir: config.json,
// result.json, agent/trajectory.json (continuations beside it) and, when
// the run was verified, verifier/reward.txt.
func writeTrial(dir string, r *trajectory.Run, cx Context, docs []ATIFDoc) error {
	if err := os.MkdirAll(filepath.Join(dir, "agent"), 0o755); err != nil {
		return err
	}
	for _, d := range docs {
		if err := writeJSON(filepath.Join(dir, "agent", d.File), d.ATIF); err != nil {
			return err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	task := cx.World
	if task == "" {
		task = r.ID
	}
	taskPath := filepath.Join(r.Dir, "task")
	cfg := harborTrialConfig{Task: harborTask{Path: taskPath}, TrialName: r.ID, TrialsDir: filepath.Dir(abs), Agent: harborAgent{Name: "apodex", ModelName: r.Model.Name}}
	sum := sha256.Sum256([]byte(r.Objective))
	res := harborTrialResult{
		ID: uuidOf(r.ID), TaskName: task, TrialName: r.ID, TrialURI: "file://" + filepath.ToSlash(abs), TaskID: harborTask{Path: taskPath},
		TaskChecksum: hex.EncodeToString(sum[:]), Config: cfg,
		AgentInfo: harborAgentInfo{Name: "apodex", Version: version.Runtime, ModelInfo: &harborModelInfo{Name: r.Model.Name, Provider: r.Model.Provider}},
		AgentResult: harborContext{NInputTokens: r.Usage.PromptTokens, NCacheTokens: r.Usage.CachedTokens, NOutputTokens: r.Usage.CompletionTokens,
			Metadata: map[string]any{"run": r.ID, "status": r.Status, "termination": r.Termination}},
	}
	if cx.Config != "" {
		res.AgentResult.Metadata["config"] = cx.Config
	}
	res.StartedAt, res.FinishedAt = stamp(r.StartedAt), stamp(r.FinishedAt)
	if r.Checked {
		reward := 0.0
		if r.Verified {
			reward = 1
		}
		res.VerifierResult = &harborVerifier{Rewards: map[string]float64{"reward": reward}}
		if err := os.MkdirAll(filepath.Join(dir, "verifier"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "verifier", "reward.txt"), fmt.Appendf(nil, "%g\n", reward), 0o644); err != nil {
			return err
		}
	}
	switch r.Termination {
	case "", "completed", "gate_failed":
	default:
		at := r.FinishedAt
		if at.IsZero() {
			at = r.StartedAt
		}
		res.ExceptionInfo = &harborException{ExceptionType: r.Termination, ExceptionMessage: r.Status + ": " + r.Termination, OccurredAt: stamp(at)}
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "result.json"), res)
}

// uuidOf is a stable UUID (version 4 layout) derived from s.
func uuidOf(s string) string {
	h := sha256.Sum256([]byte("apodex trial " + s))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
