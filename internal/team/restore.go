package team

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// Restore rebuilds the coordination plane of a stopped run from its record
// (R-REC-4): the board (a fold of its events), every assignment and its
// state, the lead's counters and undelivered notices. Assignments that were
// queued or running start again: a running one continues from its
// checkpoint, in a fresh worktree rebuilt from the shared workspace and the
// file changes it had recorded, with ctx's values. Call it before the
// lead resumes.
func (t *Team) Restore(ctx context.Context, dir string, st *runstate.State, events []record.Event, agents map[string]*checkpoint.Agent) error {
	if st.BoardErr != nil {
		return fmt.Errorf("team: restore the board: %w", st.BoardErr)
	}
	t.mu.Lock()
	var resume []*Assignment
	leadSeen := st.LeadSeen // seq of the lead's last sight of notices
	ended := map[string]int64{}
	t.board = st.Board.Clone()
	for _, ra := range st.Assignments {
		a := &Assignment{ID: ra.Assignment.Assignment, Item: ra.Item, Role: ra.Role, Instructions: ra.Instructions, Tools: ra.Tools,
			State: ra.State, Reason: ra.Reason, Report: ra.Report}
		t.assignments[a.ID] = a
		t.order = append(t.order, a.ID)
		t.dispatched++
		if ra.Ended() {
			ended[a.ID] = ra.EndedSeq
		}
	}
	// The claim ledger and effort waves so far (ids and counts go on; the
	// runtime's agents are numbered on from the record, agents.go).
	waves := 0
	for _, ef := range st.Efforts {
		waves = max(waves, ef.Wave)
	}
	for _, e := range events {
		if p, _ := record.DecodePayload(e); p != nil {
			if k, ok := p.(*record.Claim); ok {
				t.claims = append(t.claims, *k)
				if a := t.assignments[k.Assignment]; a != nil {
					a.ClaimIDs = append(a.ClaimIDs, k.ID)
				}
			}
		}
	}
	t.checker.Restored(waves)
	t.writer.Restore(events)
	t.verified += len(st.Verdicts)
	t.planning = st.Planning
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
		t.restart(ctx, dir, events, a, agents[a.ID])
	}
	return nil
}

// restart starts a queued or running assignment again after a stop.
func (t *Team) restart(ctx context.Context, dir string, events []record.Event, a *Assignment, cp *checkpoint.Agent) {
	a.worktree = fmt.Sprintf("%s-resumed-%d", a.ID, time.Now().UnixNano())
	t.mu.Lock()
	actx := t.assignmentContext(ctx, a)
	it, _ := t.board.Get(a.Item)
	t.revise(a)
	task := t.firstMessage(a, it)
	t.mu.Unlock()
	var restore *agent.Restore
	var deltas []seqDelta
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
			if e.Agent != a.ID {
				continue
			}
			p, _ := record.DecodePayload(e)
			if d, ok := p.(*record.FileDelta); ok && d.CallID != "merge:"+a.ID {
				deltas = append(deltas, seqDelta{e.Seq, *d})
			}
		}
	}
	t.wg.Add(1)
	go t.executeFrom(actx, a, t.slots.ticket(), task, restore, finished, func(wtDir string) error { return replayDeltas(dir, wtDir, deltas) })
}

// seqDelta is a recorded file change with the seq of its event.
type seqDelta struct {
	seq int64
	record.FileDelta
}

// replayDeltas puts back, in a fresh worktree, the files an agent had
// changed before the stop, from their recorded contents. Every write goes
// through hostfs rooted at the worktree (R-SBX-5): a delta whose path is
// not a clean plane path or that goes through a symbolic link (one the lead
// may have planted in the shared workspace since) is refused, naming its
// seq, and nothing outside the worktree is touched.
func replayDeltas(runDir, wtDir string, deltas []seqDelta) error {
	d, err := hostfs.Open(wtDir)
	if err != nil {
		return fmt.Errorf("team: rebuild the worktree: %w", err)
	}
	defer d.Close()
	for _, sd := range deltas {
		if err := replayDelta(d, runDir, sd.FileDelta); err != nil {
			return fmt.Errorf("team: the file_delta at seq %d (%q) was not replayed: %w; "+
				"the record was edited or the shared workspace now holds a link on that path: check events.jsonl at that seq and the workspace, then resume again", sd.seq, sd.Path, err)
		}
	}
	return nil
}

func replayDelta(d *hostfs.Dir, runDir string, fd record.FileDelta) error {
	if path.Clean(fd.Path) != fd.Path || !path.IsAbs(fd.Path) {
		return fmt.Errorf("%w: not a clean plane path", hostfs.ErrName)
	}
	rel, ok := cutPlane(fd.Path, "/workspace/")
	if !ok {
		if _, out := cutPlane(fd.Path, "/outputs/"); out {
			return nil // delivered through the plane, not the worktree
		}
		return fmt.Errorf("%w: not under /workspace or /outputs", hostfs.ErrName)
	}
	if fd.After == "" {
		if err := d.Remove(rel); errors.Is(err, hostfs.ErrName) || errors.Is(err, hostfs.ErrLink) {
			return err
		}
		return nil // as before: a deletion that cannot apply leaves the path as it is
	}
	data, err := deltaContent(runDir, fd)
	if err != nil {
		return err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := d.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	// The content is not checked against After: the runtime reads it
	// after the call, and a command may have changed the file since.
	_, _, err = d.Replace(rel, bytes.NewReader(data), 0o644, "")
	return err
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
