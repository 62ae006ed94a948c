package team

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/record"
)

// Restore rebuilds the coordination plane of a stopped run from its record
// (R-REC-4): the board (a fold of its events), every assignment and its
// state, the lead's counters and undelivered notices. Assignments that were
// queued or running start again: a running one continues from its
// checkpoint, in a fresh worktree rebuilt from the shared workspace and the
// file changes it had recorded. Call it before the lead resumes.
func (t *Team) Restore(dir string, events []record.Event, agents map[string]*checkpoint.Agent) error {
	t.mu.Lock()
	var resume []*Assignment
	leadSeen := int64(0) // seq of the lead's last sight of notices
	ended := map[string]int64{}
	for _, e := range events {
		switch e.Type {
		case EventBoard:
			var be board.Event
			if err := e.Decode(&be); err != nil {
				t.mu.Unlock()
				return err
			}
			if err := t.board.Apply(t.board.Seq()+1, be); err != nil {
				t.mu.Unlock()
				return fmt.Errorf("team: restore board at seq %d: %w", e.Seq, err)
			}
		case EventAssignment:
			var ae assignmentEvent
			if err := e.Decode(&ae); err != nil {
				t.mu.Unlock()
				return err
			}
			a, ok := t.assignments[ae.Assignment]
			if !ok {
				a = &Assignment{ID: ae.Assignment, Item: ae.Item, Role: ae.Role, Instructions: ae.Instructions, Tools: ae.Tools}
				t.assignments[a.ID] = a
				t.order = append(t.order, a.ID)
				t.dispatched++
			}
			a.State, a.Reason = ae.State, ae.Reason
			switch ae.State {
			case Reported, Failed, Cancelled, Timeout:
				ended[a.ID] = e.Seq
			}
		case EventReport:
			var re reportEvent
			if e.Decode(&re) == nil {
				if a, ok := t.assignments[re.Assignment]; ok {
					rep := re.Report
					a.Report = &rep
				}
			}
		case EventVerdict:
			t.verified++
		case record.TypeEffort:
			var ef record.Effort
			if e.Decode(&ef) == nil {
				t.waves = max(t.waves, ef.Wave)
				if ef.Phase == record.EffortInvestigator {
					t.investigators++
				}
			}
		case record.TypeClaim:
			var k record.Claim
			if e.Decode(&k) == nil {
				t.claims = append(t.claims, k)
			}
		case EventPlanning:
			var pe struct{ State string }
			if e.Decode(&pe) == nil {
				t.planning = pe.State == "started"
			}
		case record.TypeModelRequest, record.TypeToolResult, record.TypeObservation:
			if e.Agent == "lead" {
				leadSeen = e.Seq
			}
		}
	}
	// Owners the record left on the board that no live assignment explains
	// go; live assignments missing from their item's owners are put back.
	for _, it := range t.board.Items() {
		for _, owner := range it.Owners {
			if _, known := t.assignments[owner]; !known {
				t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Unassign(it.ID, owner) })
			}
		}
	}
	for _, id := range t.order {
		if a := t.assignments[id]; ended[id] == 0 {
			if it, err := t.board.Get(a.Item); err == nil && !slices.Contains(it.Owners, id) {
				t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Assign(a.Item, id) })
			}
		}
	}
	for _, id := range t.order {
		a := t.assignments[id]
		if _, done := ended[id]; done {
			// The stop may have come between its end and its release.
			it, err := t.board.Get(a.Item)
			if err == nil && a.Report != nil && !slices.Contains(it.Refs, "report:"+id) {
				t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Attach(a.Item, []string{"report:" + id}) })
			}
			if err == nil && slices.Contains(it.Owners, id) {
				t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Unassign(a.Item, id) })
			}
		}
		if seq, done := ended[id]; done {
			if seq > leadSeen { // the lead never heard of it
				t.notify(a, a.Report, a.State, a.Reason, "")
			}
			continue
		}
		resume = append(resume, a)
	}
	t.mu.Unlock()
	for _, a := range resume {
		t.restart(dir, events, a, agents[a.ID])
	}
	return nil
}

// restart starts a queued or running assignment again after a stop.
func (t *Team) restart(dir string, events []record.Event, a *Assignment, cp *checkpoint.Agent) {
	ctx, cancel := context.WithCancelCause(t.ctx)
	a.cancel = cancel
	a.worktree = fmt.Sprintf("%s-resumed-%d", a.ID, time.Now().UnixNano())
	t.mu.Lock()
	it, _ := t.board.Get(a.Item)
	task := t.firstMessage(a, it)
	t.mu.Unlock()
	var restore *agent.Restore
	var deltas []record.FileDelta
	var finished *Report
	if cp != nil && cp.Finished != nil {
		// It had reported before the stop: only its merge and its end
		// remain (a merge cut off halfway is completed: applied files
		// already match and are skipped).
		finished = &Report{Summary: *cp.Finished}
		json.Unmarshal([]byte(cp.FinishArgs), finished)
	}
	if cp != nil && cp.Turns > 0 {
		restore = &agent.Restore{History: cp.History, Turns: cp.Turns, ToolCalls: cp.ToolCalls, Usage: cp.Usage}
		for _, e := range events {
			var d record.FileDelta
			if e.Type == record.TypeFileDelta && e.Agent == a.ID && e.Decode(&d) == nil && d.CallID != "merge:"+a.ID {
				deltas = append(deltas, d)
			}
		}
	}
	t.wg.Add(1)
	go t.executeFrom(ctx, a, t.slots.ticket(), task, restore, finished, func(wtDir string) error { return replayDeltas(dir, wtDir, deltas) })
}

// replayDeltas puts back, in a fresh worktree, the files an agent had
// changed before the stop, from their recorded contents.
func replayDeltas(runDir, wtDir string, deltas []record.FileDelta) error {
	for _, d := range deltas {
		rel, ok := cutPlane(d.Path, "/workspace/")
		if !ok {
			continue
		}
		target := filepath.Join(wtDir, filepath.FromSlash(rel))
		if d.After == "" {
			os.Remove(target)
			continue
		}
		data, err := deltaContent(runDir, d)
		if err != nil {
			return fmt.Errorf("team: rebuild %s: %w", d.Path, err)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func deltaContent(runDir string, d record.FileDelta) ([]byte, error) {
	if d.Content != "" { // small text is kept in the event itself
		return []byte(d.Content), nil
	}
	if d.ContentRef == "" {
		return nil, fmt.Errorf("its content was not kept (too large)")
	}
	p, err := record.BlobPath(runDir, d.ContentRef)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

func cutPlane(p, prefix string) (string, bool) {
	if len(p) > len(prefix) && p[:len(prefix)] == prefix {
		return p[len(prefix):], true
	}
	return "", false
}
