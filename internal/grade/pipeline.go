package grade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Roles of the four stages' callers.
const (
	RoleMapper   = llm.CallerGradeMapper
	RoleJudge    = llm.CallerGradeJudge
	RoleReviewer = llm.CallerGradeReviewer
	RoleArbiter  = llm.CallerGradeArbiter
)

// File is where a run's grade is kept, in its directory.
const File = "grade.json"

// MaxAttempts bounds how often a stage is asked again after a bad answer.
const MaxAttempts = 3

// Models are the four stages' models.
type Models struct{ Mapper, Judge, Reviewer, Arbiter llm.Model }

// Result is grade.json.
type Result struct {
	Run          string     `json:"run"`
	Rubric       string     `json:"rubric"`
	Items        []Verdict  `json:"items"`
	Capabilities []CapScore `json:"capabilities"`
	Total        int        `json:"total"`
	Max          int        `json:"max"`
	Stages       []Stage    `json:"stages"`
	Usage        llm.Usage  `json:"grader_usage"`
}

// Verdict is one item's final band with the history of how it was reached.
type Verdict struct {
	Item       string    `json:"item"`
	Capability string    `json:"capability"`
	Band       int       `json:"band"`
	Cites      []int64   `json:"cites"`
	Rationale  string    `json:"rationale"`
	Window     []int64   `json:"window,omitempty"` // the mapper's seqs
	History    []Opinion `json:"history"`
}

// Opinion is one stage's word on an item.
type Opinion struct {
	Stage     string  `json:"stage"`
	Band      int     `json:"band"`
	Agree     *bool   `json:"agree,omitempty"`
	Cites     []int64 `json:"cites"`
	Rationale string  `json:"rationale"`
}

// CapScore is a capability's sum of bands (0–8).
type CapScore struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Score int    `json:"score"`
	Max   int    `json:"max"`
}

// Stage is one stage's calls: attempts and usage.
type Stage struct {
	Stage    string    `json:"stage"`
	Role     string    `json:"role"`
	Items    int       `json:"items"`
	Attempts int       `json:"attempts"`
	Usage    llm.Usage `json:"usage"`
}

// Read reads a run's grade.json.
func Read(dir string) (*Result, error) {
	raw, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("grade: %s: %w", File, err)
	}
	return &r, nil
}

// Write stores r as dir/grade.json.
func Write(dir string, r *Result) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, File), append(raw, '\n'), 0o644)
}

// Run grades the run in dir.
func Run(ctx context.Context, dir string, m Models) (*Result, error) {
	c, err := record.Read(dir)
	if err != nil {
		return nil, err
	}
	runID := filepath.Base(dir)
	if len(c.Events) > 0 {
		p, _ := record.DecodePayload(c.Events[0])
		if rs, ok := p.(*record.RunStarted); ok && rs.RunID != "" {
			runID = rs.RunID
		}
	}
	v := NewView(c.Events)
	ctx = llm.WithCaller(ctx, llm.Caller{Run: runID, Agent: "grader"})
	res := &Result{Run: runID, Rubric: "HDS6", Max: 2 * len(Items())}

	// 1. mapper: windows per item.
	var mapped struct {
		Windows []struct {
			Item string  `json:"item"`
			Seqs []int64 `json:"seqs"`
		} `json:"windows"`
	}
	st, err := ask(ctx, m.Mapper, RoleMapper, mapperPrompt(v), mapperTool, v, &mapped, func() error {
		for _, w := range mapped.Windows {
			if capabilityOf(w.Item) == "" {
				return fmt.Errorf("unknown item %q", w.Item)
			}
			if err := v.check(w.Seqs); err != nil {
				return fmt.Errorf("item %s: %w", w.Item, err)
			}
		}
		return nil
	})
	res.Stages = append(res.Stages, st.named("mapper", len(Items())))
	if err != nil {
		return nil, err
	}
	windows := map[string][]int64{}
	for _, w := range mapped.Windows {
		windows[w.Item] = append(windows[w.Item], w.Seqs...)
	}

	// 2. judge: a band per item.
	var judged bandAnswer
	st, err = ask(ctx, m.Judge, RoleJudge, judgePrompt(v, windows), bandTool("record_bands", "The band of every one of the 24 items.", false), v, &judged, func() error {
		return judged.check(v, itemIDs(), false)
	})
	res.Stages = append(res.Stages, st.named("judge", len(Items())))
	if err != nil {
		return nil, err
	}
	verdicts := map[string]*Verdict{}
	for _, b := range judged.Items {
		verdicts[b.Item] = &Verdict{Item: b.Item, Capability: capabilityOf(b.Item), Band: b.Band, Cites: b.Cites, Rationale: b.Rationale, Window: windows[b.Item],
			History: []Opinion{{Stage: "judge", Band: b.Band, Cites: b.Cites, Rationale: b.Rationale}}}
	}

	// 3. reviewer: every band-2 verdict.
	var high []string
	for _, id := range itemIDs() {
		if verdicts[id].Band == 2 {
			high = append(high, id)
		}
	}
	var disputed []string
	if len(high) > 0 {
		var reviewed bandAnswer
		st, err = ask(ctx, m.Reviewer, RoleReviewer, reviewPrompt(v, verdicts, high), bandTool("record_reviews", "Your review of each band-2 verdict you were given.", true), v, &reviewed, func() error {
			return reviewed.check(v, high, true)
		})
		res.Stages = append(res.Stages, st.named("reviewer", len(high)))
		if err != nil {
			return nil, err
		}
		for _, b := range reviewed.Items {
			vd := verdicts[b.Item]
			agree := b.Agree != nil && *b.Agree && b.Band == vd.Band
			vd.History = append(vd.History, Opinion{Stage: "reviewer", Band: b.Band, Agree: &agree, Cites: b.Cites, Rationale: b.Rationale})
			if !agree {
				disputed = append(disputed, b.Item)
			}
		}
	}

	// 4. arbiter: items where judge and reviewer disagree.
	if len(disputed) > 0 {
		var settled bandAnswer
		st, err = ask(ctx, m.Arbiter, RoleArbiter, arbiterPrompt(v, verdicts, disputed), bandTool("record_settlements", "Your final band for each disputed item.", false), v, &settled, func() error {
			return settled.check(v, disputed, false)
		})
		res.Stages = append(res.Stages, st.named("arbiter", len(disputed)))
		if err != nil {
			return nil, err
		}
		for _, b := range settled.Items {
			vd := verdicts[b.Item]
			vd.Band, vd.Cites, vd.Rationale = b.Band, b.Cites, b.Rationale
			vd.History = append(vd.History, Opinion{Stage: "arbiter", Band: b.Band, Cites: b.Cites, Rationale: b.Rationale})
		}
	}

	for _, cp := range Rubric {
		cs := CapScore{ID: cp.ID, Name: cp.Name, Max: 8}
		for _, it := range cp.Items {
			vd := verdicts[it.ID]
			cs.Score += vd.Band
			res.Items = append(res.Items, *vd)
		}
		res.Total += cs.Score
		res.Capabilities = append(res.Capabilities, cs)
	}
	res.Usage = llm.Usage{Reported: true}
	for _, s := range res.Stages {
		res.Usage = res.Usage.Add(s.Usage)
	}
	return res, nil
}

func itemIDs() []string {
	var ids []string
	for _, it := range Items() {
		ids = append(ids, it.ID)
	}
	return ids
}

// check says whether every seq exists and is visible.
func (v View) check(seqs []int64) error {
	for _, s := range seqs {
		if !v.Visible[s] {
			return fmt.Errorf("seq %d is not a line of the visible log; cite only seqs shown as [seq N]", s)
		}
	}
	return nil
}

type band struct {
	Item      string  `json:"item"`
	Band      int     `json:"band"`
	Agree     *bool   `json:"agree,omitempty"`
	Cites     []int64 `json:"cites"`
	Rationale string  `json:"rationale"`
}

type bandAnswer struct {
	Items []band `json:"items"`
}

// check: exactly the wanted items, bands 0–2, cites visible; a band above
// 0 must cite.
func (a *bandAnswer) check(v View, want []string, review bool) error {
	seen := map[string]bool{}
	for _, b := range a.Items {
		if !slices.Contains(want, b.Item) {
			return fmt.Errorf("item %q was not asked for; answer exactly: %s", b.Item, strings.Join(want, ", "))
		}
		if seen[b.Item] {
			return fmt.Errorf("item %s is answered twice", b.Item)
		}
		seen[b.Item] = true
		if b.Band < 0 || b.Band > 2 {
			return fmt.Errorf("item %s: band %d is not 0, 1 or 2", b.Item, b.Band)
		}
		if review && b.Agree == nil {
			return fmt.Errorf("item %s: say agree true or false", b.Item)
		}
		if b.Band > 0 && len(b.Cites) == 0 {
			return fmt.Errorf("item %s: band %d must cite the seqs it rests on", b.Item, b.Band)
		}
		if err := v.check(b.Cites); err != nil {
			return fmt.Errorf("item %s: %w", b.Item, err)
		}
	}
	var missing []string
	for _, w := range want {
		if !seen[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("items not answered: %s", strings.Join(missing, ", "))
	}
	return nil
}

type stageRun struct {
	role     string
	attempts int
	usage    llm.Usage
}

func (s stageRun) named(name string, items int) Stage {
	return Stage{Stage: name, Role: s.role, Items: items, Attempts: s.attempts, Usage: s.usage}
}

// ErrStage: a stage did not give a valid answer in MaxAttempts.
var ErrStage = errors.New("grade: the grader did not give a valid answer")

// ask makes one stage's call, decodes its tool call into out and checks
// it; a bad answer is returned to the model with the error, up to
// MaxAttempts times.
func ask(ctx context.Context, m llm.Model, role, prompt string, tool llm.ToolSpec, _ View, out any, check func() error) (stageRun, error) {
	st := stageRun{role: role, usage: llm.Usage{Reported: true}}
	if m == nil {
		return st, fmt.Errorf("grade: no model for %s; pass its model flag or a provider", role)
	}
	ctx = llm.WithCaller(ctx, llm.Caller{Role: role})
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: systemPrompt},
		{Role: llm.RoleUser, Content: prompt},
	}
	var last error
	for st.attempts < MaxAttempts {
		st.attempts++
		resp, err := m.Generate(ctx, &llm.Request{Messages: msgs, Tools: []llm.ToolSpec{tool}, Agent: "grader", Purpose: role})
		if err != nil {
			return st, fmt.Errorf("grade: %s: %w", role, err)
		}
		st.usage = st.usage.Add(resp.Usage)
		msgs = append(msgs, resp.Message)
		var call *llm.ToolCall
		for i := range resp.Message.ToolCalls {
			if resp.Message.ToolCalls[i].Name == tool.Name {
				call = &resp.Message.ToolCalls[i]
				break
			}
		}
		switch {
		case call == nil:
			last = fmt.Errorf("no %s call", tool.Name)
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "Answer by calling " + tool.Name + " once."})
			for _, tc := range resp.Message.ToolCalls {
				msgs = slices.Insert(msgs, len(msgs)-1, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: "error: only " + tool.Name + " is available", IsError: true})
			}
			continue
		default:
			if err := json.Unmarshal([]byte(call.Arguments), out); err != nil {
				last = fmt.Errorf("arguments are not valid JSON for the schema: %v", err)
			} else {
				last = check()
			}
		}
		if last == nil {
			return st, nil
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, IsError: true,
			Content: "error: " + last.Error() + ". Call " + tool.Name + " again with the whole corrected answer."})
	}
	return st, fmt.Errorf("%w at stage %s after %d attempts: %v; try a stronger model with its stage flag", ErrStage, role, st.attempts, last)
}
