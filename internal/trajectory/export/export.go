// Package export writes finished runs as training data (SPEC R-DATA):
// chat-format JSONL with tool calls, Harbor's ATIF trajectories (optionally
// as Harbor trial directories) and the native record as one archive; and
// the filters that drop unfit rollouts. It reads runs only through
// trajectory.Load.
//
// Guarantees:
//   - a chat line is one agent's whole model-visible history: every
//     assistant tool call is answered by exactly one tool message with its
//     tool_call_id, in order; a team run gives one line per agent, each
//     naming the lead's run and its parent;
//   - a filter never drops silently: the Exporter records a Decision for
//     every run it judges, kept or dropped, with each reason.
package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/trajectory"
	"github.com/apodex/apodex/internal/version"
)

// Exporter writes the runs its Filter keeps in one Format ("chat", "atif"
// or "native"), and records a Decision for every run it judges, kept or
// dropped. Chat lines, and atif documents without Out, go to W (a chat
// line's metadata to Meta, when set); with Out, atif writes
// Out/RUN/trajectory.json (its continuations beside it), or with Layout
// "harbor" a Harbor trial directory Out/RUN (config.json, result.json,
// agent/trajectory.json), and native Out/RUN.tar.gz.
type Exporter struct {
	Format, Out string
	Filter      Filter
	W           io.Writer
	Meta        io.Writer
	Chat        ChatOptions
	// ATIF is the schema version written (ATIFVersion when "").
	ATIF   string
	Layout string
	Report []Decision
}

// Export judges the run in dir and, if kept, writes it.
func (o *Exporter) Export(dir string, cx Context) error {
	r, err := trajectory.Load(dir)
	if err != nil {
		return err
	}
	d := o.Filter.Judge(r, cx)
	o.Report = append(o.Report, d)
	if !d.Kept {
		return nil
	}
	switch o.Format {
	case "chat":
		lines, metas := Chat(r, cx, o.Chat)
		for i, line := range lines {
			if err := writeLine(o.W, line); err != nil {
				return err
			}
			if o.Meta != nil {
				if err := writeLine(o.Meta, metas[i]); err != nil {
					return err
				}
			}
		}
	case "atif":
		docs := ToATIF(r, cx, version.Runtime, o.ATIF)
		if o.Out == "" {
			for _, d := range docs {
				if err := writeLine(o.W, d.ATIF); err != nil {
					return err
				}
			}
			return nil
		}
		dir := filepath.Join(o.Out, r.ID)
		if o.Layout == LayoutHarbor {
			if err := writeTrial(dir, r, cx, docs); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		for _, d := range docs {
			if err := writeJSON(filepath.Join(dir, d.File), d.ATIF); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
		}
		return nil
	case "native":
		if o.Out == "" {
			return Native(o.W, dir, r.ID)
		}
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		f, err := os.Create(filepath.Join(o.Out, r.ID+".tar.gz"))
		if err != nil {
			return err
		}
		defer f.Close()
		return Native(f, dir, r.ID)
	}
	return nil
}

func writeLine(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}

func writeJSON(p string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(raw, '\n'), 0o644)
}

// NoRun records a rollout that ended before its run started: dropped,
// with its status as the reason.
func (o *Exporter) NoRun(r Rollout) {
	o.Report = append(o.Report, Decision{World: r.Ctx.World, Reasons: []string{"no run: the rollout ended before its run started (" + r.Status + ")"}})
}

// Rollout is one line of an eval's results.jsonl.
type Rollout struct {
	RunID  string
	Ctx    Context
	Status string
}

// ReadRollouts reads the complete lines of results.jsonl from byte offset
// off; it returns them and the offset after the last complete line. A torn
// or half-written last line is left for the next read.
func ReadRollouts(evalDir string, off int64) ([]Rollout, int64, error) {
	raw, err := os.ReadFile(filepath.Join(evalDir, "results.jsonl"))
	if os.IsNotExist(err) {
		return nil, off, nil
	}
	if err != nil {
		return nil, off, err
	}
	if off > int64(len(raw)) {
		off = 0
	}
	var out []Rollout
	sc := bufio.NewScanner(bytes.NewReader(raw[off:]))
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	pos := off
	for sc.Scan() {
		line := sc.Bytes()
		if pos+int64(len(line)) >= int64(len(raw)) && !bytes.HasSuffix(raw, []byte("\n")) {
			break // a torn or half-written last line: read it next time
		}
		pos += int64(len(line)) + 1
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		r := Rollout{Ctx: Context{Scores: map[string]any{}}}
		r.RunID, _ = m["run_id"].(string)
		r.Ctx.World, _ = m["world"].(string)
		r.Ctx.Config, _ = m["config"].(string)
		r.Status, _ = m["status"].(string)
		for k, v := range m {
			if _, num := v.(float64); num || k == "verified" {
				r.Ctx.Scores[k] = v
			}
		}
		out = append(out, r)
	}
	return out, pos, nil
}

// EvalTotal is the number of rollouts the eval's plan asks for (0: unknown).
func EvalTotal(evalDir string) int {
	var p struct {
		Worlds   []json.RawMessage `json:"worlds"`
		Configs  []json.RawMessage `json:"configs"`
		Rollouts int               `json:"rollouts"`
	}
	raw, err := os.ReadFile(filepath.Join(evalDir, "plan.json"))
	if err != nil || json.Unmarshal(raw, &p) != nil {
		return 0
	}
	return len(p.Worlds) * len(p.Configs) * p.Rollouts
}

// ParseDrop parses --drop: comma-separated names from DropNames.
func ParseDrop(s string) (map[string]bool, error) {
	drop := map[string]bool{}
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if !slices.Contains(DropNames, d) {
			return nil, fmt.Errorf("--drop %q: use %s", d, strings.Join(DropNames, ", "))
		}
		drop[d] = true
	}
	return drop, nil
}

// UseGrades makes f read grades with GradeOf after checking that every
// capability its thresholds name is in the HDS6 rubric.
func UseGrades(f *Filter) error {
	var ids []string
	for _, c := range grade.Rubric {
		ids = append(ids, c.ID)
	}
	for c := range f.MinCapability {
		if !slices.Contains(ids, c) {
			return fmt.Errorf("--min-grade %s: unknown capability; use one of %s", c, strings.Join(ids, ", "))
		}
	}
	f.GradeOf = GradeOf
	return nil
}

// GradeOf reads the grade.json of the run in dir: total and per-capability scores.
func GradeOf(dir string) (int, map[string]int, error) {
	g, err := grade.Read(dir)
	if err != nil {
		return 0, nil, err
	}
	by := map[string]int{}
	for _, c := range g.Capabilities {
		by[c.ID] = c.Score
	}
	return g.Total, by, nil
}
