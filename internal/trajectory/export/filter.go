package export

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/trajectory"
)

// Drop reasons, as --drop names them (docs/export.md defines each).
const (
	DropInvalidTool        = "invalid-tool"
	DropInconsistentState  = "inconsistent-state"
	DropIgnoredObservation = "ignored-observation"
	DropIncompleteDelivery = "incomplete-delivery"
	DropNotTrainable       = "not-trainable"
)

// DropNames are the reasons --drop accepts.
var DropNames = []string{DropInvalidTool, DropInconsistentState, DropIgnoredObservation, DropIncompleteDelivery, DropNotTrainable}

// Filter selects rollouts. The zero Filter keeps everything.
type Filter struct {
	Drop            map[string]bool
	RequireVerified bool
	// Gold maps a world (or run id) to its expected answer; a rollout of a
	// world with a gold answer is kept only if its answer holds it.
	Gold map[string]string
	// MinTotal and MinCapability are grade thresholds (-1: none).
	MinTotal      int
	MinCapability map[string]int
	// GradeOf reads a run's grade: total and per-capability scores.
	GradeOf func(dir string) (total int, byCapability map[string]int, err error)
}

// Decision is one rollout's line of the report.
type Decision struct {
	Run          string   `json:"run"`
	World        string   `json:"world,omitempty"`
	Trajectories []string `json:"trajectories"`
	Kept         bool     `json:"kept"`
	Reasons      []string `json:"reasons,omitempty"`
}

// Judge applies f to r and says why it is dropped (nothing: kept).
func (f *Filter) Judge(r *trajectory.Run, cx Context) Decision {
	d := Decision{Run: r.ID, World: cx.World}
	for _, c := range r.Conversations {
		d.Trajectories = append(d.Trajectories, c.ID)
	}
	add := func(code, why string) { d.Reasons = append(d.Reasons, code+": "+why) }
	if f.Drop[DropInvalidTool] {
		for _, w := range InvalidTools(r) {
			add(DropInvalidTool, w)
		}
	}
	if f.Drop[DropInconsistentState] {
		for _, w := range Inconsistent(r) {
			add(DropInconsistentState, w)
		}
	}
	if f.Drop[DropIgnoredObservation] {
		for _, w := range IgnoredObservations(r) {
			add(DropIgnoredObservation, w)
		}
	}
	if f.Drop[DropIncompleteDelivery] && r.HasDelivery && !r.Delivered {
		add(DropIncompleteDelivery, "the reconciled manifest was not delivered whole")
	}
	if f.Drop[DropNotTrainable] {
		if ok, why := runview.Trainability(r.Dir); !ok {
			add(DropNotTrainable, strings.Join(why, "; "))
		}
	}
	if f.RequireVerified && !r.Verified {
		add("not-verified", fmt.Sprintf("the verifier did not pass (status %s)", r.Status))
	}
	if len(f.Gold) > 0 {
		key := cx.World
		if _, ok := f.Gold[key]; !ok {
			key = r.ID
		}
		if want, ok := f.Gold[key]; ok && !answerHolds(r, want) {
			add("gold", fmt.Sprintf("the answer does not contain the gold answer for %s", key))
		}
	}
	if f.MinTotal >= 0 || len(f.MinCapability) > 0 {
		f.judgeGrade(r, add)
	}
	d.Kept = len(d.Reasons) == 0
	return d
}

func (f *Filter) judgeGrade(r *trajectory.Run, add func(code, why string)) {
	if f.GradeOf == nil {
		add("min-grade", "no grader is configured")
		return
	}
	total, by, err := f.GradeOf(r.Dir)
	if err != nil {
		add("min-grade", fmt.Sprintf("not graded (%v); run `apodex grade %s` first", err, r.ID))
		return
	}
	if f.MinTotal >= 0 && total < f.MinTotal {
		add("min-grade", fmt.Sprintf("total %d < %d", total, f.MinTotal))
	}
	caps := make([]string, 0, len(f.MinCapability))
	for c := range f.MinCapability {
		caps = append(caps, c)
	}
	sort.Strings(caps)
	for _, c := range caps {
		if got, want := by[c], f.MinCapability[c]; got < want {
			add("min-grade", fmt.Sprintf("%s %d < %d", c, got, want))
		}
	}
}

// answerHolds: the final summary or a delivered output file contains want
// (case and spacing ignored).
func answerHolds(r *trajectory.Run, want string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	w := norm(want)
	if strings.Contains(norm(r.Answer), w) {
		return true
	}
	for _, f := range r.Files {
		if !strings.HasPrefix(f.Path, "/outputs/") || f.Bytes > 1<<20 {
			continue
		}
		b, err := hostfs.ReadFile(r.Dir, strings.TrimPrefix(f.Path, "/"), 1<<20)
		if err == nil && strings.Contains(norm(string(b)), w) {
			return true
		}
	}
	return false
}

// InvalidTools are the calls that named a tool the agent was not offered,
// or whose arguments were not a JSON object.
func InvalidTools(r *trajectory.Run) []string {
	offered := map[string]map[string]bool{}
	for _, a := range r.Agents {
		if len(a.Tools) > 0 {
			offered[a.ID] = map[string]bool{}
			for _, t := range a.Tools {
				offered[a.ID][t.Name] = true
			}
		}
	}
	var out []string
	for _, c := range r.Calls() {
		unknown := c.Result != nil && c.Result.IsError && strings.Contains(c.Result.Output, "unknown tool")
		if o := offered[c.Agent]; o != nil && !o[c.Name] {
			unknown = true
		}
		var obj map[string]any
		switch {
		case unknown:
			out = append(out, fmt.Sprintf("seq %d: %s called unknown tool %q", c.Seq, c.Agent, c.Name))
		case json.Unmarshal([]byte(c.Arguments), &obj) != nil:
			out = append(out, fmt.Sprintf("seq %d: %s called %s with arguments that are not a JSON object", c.Seq, c.Agent, c.Name))
		}
	}
	return out
}

// Inconsistent finds where the record disagrees with itself: a result for
// a call never made, a call answered twice, a finished run with a call
// never answered.
func Inconsistent(r *trajectory.Run) []string {
	var out []string
	made := map[string]bool{}
	answered := map[string]bool{}
	finished := false
	for _, e := range r.Events {
		p, _ := record.DecodePayload(e) // nil when it does not decode
		switch p := p.(type) {
		case *record.ToolCall:
			made[e.Agent+"\x00"+p.CallID] = true
		case *record.ToolResult:
			tr := p
			k := e.Agent + "\x00" + tr.CallID
			switch {
			case !made[k]:
				out = append(out, fmt.Sprintf("seq %d: a result for call %s that %s never made", e.Seq, tr.CallID, e.Agent))
			case answered[k]:
				out = append(out, fmt.Sprintf("seq %d: call %s of %s answered twice", e.Seq, tr.CallID, e.Agent))
			}
			answered[k] = true
		case *record.RunFinished:
			finished = true
		}
	}
	if finished {
		for _, c := range r.Calls() {
			if c.Result == nil {
				out = append(out, fmt.Sprintf("seq %d: call %s of %s never answered", c.Seq, c.CallID, c.Agent))
			}
		}
	}
	return out
}

// IgnoredObservations are failing calls repeated unchanged after their
// error: the same agent makes the same call (tool and arguments, spacing
// aside) again with no file changed in between.
func IgnoredObservations(r *trajectory.Run) []string {
	var out []string
	deltas := map[int64]bool{}
	for _, e := range r.Events {
		if _, ok := record.As[record.FileDelta](e); ok {
			deltas[e.Seq] = true
		}
	}
	calls := r.Calls()
	lastDelta := func(from, to int64) bool {
		for s := from + 1; s < to; s++ {
			if deltas[s] {
				return true
			}
		}
		return false
	}
	type fail struct{ resultSeq int64 }
	last := map[string]fail{}
	for _, c := range calls {
		k := c.Agent + "\x00" + c.Name + "\x00" + trajectory.NormArgs(c.Arguments)
		if f, ok := last[k]; ok && c.Seq > f.resultSeq && !lastDelta(f.resultSeq, c.Seq) {
			out = append(out, fmt.Sprintf("seq %d: %s repeated %s unchanged after its error at seq %d", c.Seq, c.Agent, c.Name, f.resultSeq))
		}
		if c.Result != nil && c.Result.IsError {
			last[k] = fail{c.ResultSeq}
		} else {
			delete(last, k)
		}
	}
	return out
}

// ParseMinGrade reads --min-grade: N (the total) or CAPABILITY=N.
func ParseMinGrade(s string, f *Filter) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, hasEq := strings.Cut(part, "=")
		if !hasEq {
			val, name = name, ""
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 {
			return fmt.Errorf("--min-grade %q: give N (the total, 0–48) or CAPABILITY=N (0–8), e.g. --min-grade 30 or --min-grade evidence=6", part)
		}
		if name == "" {
			f.MinTotal = n
			continue
		}
		if f.MinCapability == nil {
			f.MinCapability = map[string]int{}
		}
		f.MinCapability[strings.TrimSpace(name)] = n
	}
	return nil
}
