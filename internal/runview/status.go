package runview

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/inbox"
)

// Progress answers "how far along is it?" from the record, the board and
// the message queue alone: reading them disturbs no agent.
type Progress struct {
	RunID       string            `json:"run_id"`
	Liveness    string            `json:"liveness"`
	Paused      bool              `json:"paused"`
	Status      string            `json:"status"`
	Termination string            `json:"termination_reason,omitempty"`
	Objective   string            `json:"objective"`
	Elapsed     string            `json:"elapsed"`
	Turns       int               `json:"turns"`
	ToolCalls   int               `json:"tool_calls"`
	Tokens      int               `json:"tokens"`
	Board       board.Counts      `json:"board"`
	Items       []board.Item      `json:"items,omitempty"`
	Assignments map[string]string `json:"assignments,omitempty"` // id -> state
	LastStep    string            `json:"last_step,omitempty"`
	Messages    map[string]int    `json:"messages,omitempty"` // state -> count
}

// Status reads the progress of the run in dir.
func Status(dir string) (Progress, error) { return status(dir, true) }

// status reads the progress; messages counts the queue's messages, which
// takes the inbox lock. The run answers a progress query while Deliver holds
// that lock, so its answer leaves them out (taking it again would deadlock).
func status(dir string, messages bool) (Progress, error) {
	st, err := loadState(dir)
	if err != nil {
		return Progress{}, err
	}
	info := rowOf(dir, st) // not infoOf: progress needs no trainability (which hashes the inputs)
	p := Progress{RunID: info.RunID, Liveness: Liveness(dir), Status: info.Status, Termination: info.Termination,
		Objective: info.Objective, Turns: info.Turns, ToolCalls: info.ToolCalls, Tokens: info.Usage.TotalTokens, Paused: st.Paused}
	end := time.Now()
	if info.Finished != nil {
		end = *info.Finished
	}
	if p.Liveness == Stopped && !st.LastTime.IsZero() {
		end = st.LastTime // it stopped running then
	}
	if !info.Started.IsZero() {
		p.Elapsed = end.Sub(info.Started).Round(time.Second).String()
	}
	if n := len(st.Steps); n > 0 {
		st := st.Steps[n-1]
		p.LastStep = fmt.Sprintf("%s turn %d: %s %s", st.Agent, st.Turn, st.Tool, clipText(st.Args, 80))
	}
	for _, a := range st.Assignments {
		if p.Assignments == nil {
			p.Assignments = map[string]string{}
		}
		p.Assignments[a.Assignment.Assignment] = a.State
	}
	b := st.Board
	p.Board, p.Items = b.Counts(), b.Items()
	if !messages {
		return p, nil
	}
	if msgs, err := inbox.List(dir); err == nil && len(msgs) > 0 {
		p.Messages = map[string]int{}
		for _, m := range msgs {
			p.Messages[string(m.State)]++
		}
	}
	return p, nil
}

// StatusText is Status in a few lines, the runtime's answer to a progress
// query. It is called under the inbox lock: it must not take it.
func StatusText(dir string) string {
	p, err := status(dir, false)
	if err != nil {
		return "progress unavailable: " + err.Error()
	}
	return p.Text()
}

// Text renders the progress for people.
func (p Progress) Text() string {
	var b strings.Builder
	switch {
	case p.Liveness == Stopped:
		fmt.Fprintf(&b, "run %s: stopped (its process ended without finishing; `apodex resume %s` continues it), ran %s\n", p.RunID, p.RunID, p.Elapsed)
	default:
		state := p.Liveness
		if p.Paused && p.Liveness == Live {
			state += ", paused"
		}
		fmt.Fprintf(&b, "run %s: %s (%s", p.RunID, p.Status, state)
		if p.Termination != "" {
			fmt.Fprintf(&b, ", %s", p.Termination)
		}
		fmt.Fprintf(&b, "), elapsed %s\n", p.Elapsed)
	}
	fmt.Fprintf(&b, "turns %d, tool calls %d, tokens %d\n", p.Turns, p.ToolCalls, p.Tokens)
	if p.Board.Total() > 0 {
		fmt.Fprintf(&b, "board: %d items: %d open, %d in progress, %d resolved, %d cancelled\n",
			p.Board.Total(), p.Board.Open, p.Board.InProgress, p.Board.Resolved, p.Board.Cancelled)
		for _, it := range p.Items {
			fmt.Fprintf(&b, "  %s %-11s %s\n", it.ID, it.State, it.Title)
		}
	}
	if len(p.Assignments) > 0 {
		counts := map[string]int{}
		for _, st := range p.Assignments {
			counts[st]++
		}
		fmt.Fprintf(&b, "assignments: %d: %s\n", len(p.Assignments), countList(counts))
	}
	if p.LastStep != "" {
		fmt.Fprintf(&b, "last step: %s\n", p.LastStep)
	}
	if len(p.Messages) > 0 {
		n := 0
		for _, c := range p.Messages {
			n += c
		}
		fmt.Fprintf(&b, "messages: %d: %s\n", n, countList(p.Messages))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// countList renders counts for people: "2 running, 1 reported", by name.
func countList(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
