package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/trajectory"
)

type exportOpts struct {
	format, out string
	filter      trajectory.Filter
	report      []trajectory.Decision
	w           io.Writer // chat lines and single documents
	n           int
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "--format chat|atif|native [flags] RUN|EVAL...", stdout, stderr)
	home := fs.homeFlag()
	format := fs.String("format", "chat", "chat (OpenAI fine-tuning JSONL, one line per agent), atif (Harbor ATIF v1.7 trajectory.json per run) or native (the run directory as a .tar.gz)")
	out := fs.String("out", "", "where to write: a file for chat; a directory for atif (RUN/trajectory.json) and native (RUN.tar.gz); default stdout")
	drop := fs.String("drop", "", "drop rollouts with: "+strings.Join(trajectory.DropNames, ",")+" (comma-separated; docs/export.md defines each)")
	reqVerified := fs.Bool("require-verified", false, "keep a rollout only if its verifier passed (reject sampling)")
	gold := fs.String("gold", "", "JSON file {\"WORLD or RUN\": \"answer\"}: keep a rollout only if its answer contains the gold answer")
	minGrade := fs.String("min-grade", "", "keep a rollout only if its HDS6 grade reaches N (total, 0–48) or CAPABILITY=N (0–8); needs `apodex grade` first")
	report := fs.String("report", "", "write every rollout kept or dropped, with the reasons, to this JSON file")
	follow := fs.String("follow", "", "EVAL_ID: export each rollout of a running eval as it finishes; end when the eval does")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	o := &exportOpts{format: *format, out: *out, filter: trajectory.Filter{MinTotal: -1}}
	switch o.format {
	case "chat", "atif", "native":
	default:
		return usagef("--format %q: use chat, atif or native", o.format)
	}
	if *drop != "" {
		o.filter.Drop = map[string]bool{}
		for _, d := range strings.Split(*drop, ",") {
			d = strings.TrimSpace(d)
			if !slices.Contains(trajectory.DropNames, d) {
				return usagef("--drop %q: use %s", d, strings.Join(trajectory.DropNames, ", "))
			}
			o.filter.Drop[d] = true
		}
	}
	o.filter.RequireVerified = *reqVerified
	if *gold != "" {
		raw, err := os.ReadFile(*gold)
		if err == nil {
			err = json.Unmarshal(raw, &o.filter.Gold)
		}
		if err != nil {
			return usagef("--gold %s: %v; give a JSON object mapping each world (or run id) to its answer", *gold, err)
		}
	}
	if *minGrade != "" {
		if err := trajectory.ParseMinGrade(*minGrade, &o.filter); err != nil {
			return usagef("%v", err)
		}
		for c := range o.filter.MinCapability {
			if !knownCapability(c) {
				return usagef("--min-grade %s: unknown capability; use one of %s", c, strings.Join(capabilityIDs(), ", "))
			}
		}
		o.filter.GradeOf = gradeOf
	}
	if (len(pos) == 0) == (*follow == "") {
		return usagef("give run or eval ids (see `apodex runs`), or --follow EVAL_ID")
	}
	o.w = stdout
	if o.out != "" && o.format == "chat" {
		f, err := os.Create(o.out)
		if err != nil {
			return fmt.Errorf("--out: %w; pass a writable path", err)
		}
		defer f.Close()
		o.w = f
	}
	h := homeDir(*home)
	if *follow != "" {
		err = o.followEval(ctx, h, *follow)
	} else {
		for _, id := range pos {
			if err = o.exportID(h, id); err != nil {
				break
			}
		}
	}
	if *report != "" {
		raw, _ := json.MarshalIndent(map[string]any{"trajectories": o.report}, "", "  ")
		if werr := os.WriteFile(*report, append(raw, '\n'), 0o644); werr != nil && err == nil {
			err = fmt.Errorf("--report: %w", werr)
		}
	}
	return err
}

func capabilityIDs() []string {
	var ids []string
	for _, c := range grade.Rubric {
		ids = append(ids, c.ID)
	}
	return ids
}

func knownCapability(id string) bool { return slices.Contains(capabilityIDs(), id) }

func gradeOf(dir string) (int, map[string]int, error) {
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

// exportID exports a run, or every finished rollout of an eval.
func (o *exportOpts) exportID(home, id string) error {
	if ed := filepath.Join(home, "evals", id); strings.HasPrefix(id, "e-") && isDir(ed) {
		results, _, err := readResults(ed, 0)
		if err != nil {
			return err
		}
		for _, r := range results {
			if err := o.exportRollout(home, r); err != nil {
				return err
			}
		}
		return nil
	}
	dir, err := findRun(home, id)
	if err != nil {
		return err
	}
	return o.exportRun(dir, trajectory.Context{})
}

func isDir(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }

// rollout is one line of an eval's results.jsonl.
type rollout struct {
	RunID  string
	Ctx    trajectory.Context
	Status string
}

// readResults reads the complete lines of results.jsonl from byte offset
// off; it returns them and the offset after the last complete line.
func readResults(evalDir string, off int64) ([]rollout, int64, error) {
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
	var out []rollout
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
		r := rollout{Ctx: trajectory.Context{Scores: map[string]any{}}}
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

func (o *exportOpts) exportRollout(home string, r rollout) error {
	if r.RunID == "" {
		o.report = append(o.report, trajectory.Decision{World: r.Ctx.World, Reasons: []string{"no run: the rollout ended before its run started (" + r.Status + ")"}})
		return nil
	}
	dir, err := findRun(home, r.RunID)
	if err != nil {
		return err
	}
	return o.exportRun(dir, r.Ctx)
}

// evalTotal is the number of rollouts the eval's plan asks for (0: unknown).
func evalTotal(evalDir string) int {
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

// followEval exports rollouts as their lines reach results.jsonl, until
// the plan's every rollout has one (or ctx ends).
func (o *exportOpts) followEval(ctx context.Context, home, id string) error {
	ed := filepath.Join(home, "evals", id)
	if !isDir(ed) {
		return usagef("no eval %s under %s (see `apodex eval list`)", id, filepath.Join(home, "evals"))
	}
	var off int64
	seen := 0
	for {
		results, next, err := readResults(ed, off)
		if err != nil {
			return err
		}
		off = next
		for _, r := range results {
			if err := o.exportRollout(home, r); err != nil {
				return err
			}
			seen++
		}
		if total := evalTotal(ed); total > 0 && seen >= total {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (o *exportOpts) exportRun(dir string, cx trajectory.Context) error {
	r, err := trajectory.Load(dir)
	if err != nil {
		return err
	}
	d := o.filter.Judge(r, cx)
	o.report = append(o.report, d)
	if !d.Kept {
		return nil
	}
	o.n++
	switch o.format {
	case "chat":
		for _, line := range trajectory.Chat(r, cx) {
			raw, err := json.Marshal(line)
			if err != nil {
				return err
			}
			if _, err := o.w.Write(append(raw, '\n')); err != nil {
				return err
			}
		}
	case "atif":
		t := trajectory.ToATIF(r, cx, run.Version)
		if o.out == "" {
			raw, _ := json.Marshal(t)
			_, err := o.w.Write(append(raw, '\n'))
			return err
		}
		p := filepath.Join(o.out, r.ID, "trajectory.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		raw, _ := json.MarshalIndent(t, "", "  ")
		return os.WriteFile(p, append(raw, '\n'), 0o644)
	case "native":
		if o.out == "" {
			return trajectory.Native(o.w, dir, r.ID)
		}
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		f, err := os.Create(filepath.Join(o.out, r.ID+".tar.gz"))
		if err != nil {
			return err
		}
		defer f.Close()
		return trajectory.Native(f, dir, r.ID)
	}
	return nil
}
