package llm

import "fmt"

// A request is a valid conversation for every provider Apodex talks to when:
//   - every tool message answers a call of the nearest assistant message
//     before it that has calls, with no other message in between but other
//     results of the same turn, and answers it once;
//   - every call of an assistant message is answered before the next
//     message that is not a tool result (or the end of the request).
//
// The runtime keeps its histories so (compaction, resume, interventions and
// reports are written for it, and tests check it with Problems); Repair is
// the clients' last line of defence, so that a history broken by a bug still
// reaches the provider as a conversation it accepts instead of failing the
// run with a 400.

// Problems lists how msgs breaks the rules above, one line each, naming the
// message index; nil when it keeps them.
func Problems(msgs []Message) []string {
	var out []string
	walk(msgs, func(i int, what string) { out = append(out, fmt.Sprintf("message %d: %s", i, what)) }, nil)
	return out
}

// Repair returns msgs kept to the rules above. A result that answers no
// open call becomes a user message that says what it is (its text kept); a
// call left unanswered gets an error result saying no result was recorded.
// A history that keeps the rules is returned as is (the same slice).
func Repair(msgs []Message) []Message {
	if Problems(msgs) == nil {
		return msgs
	}
	out := make([]Message, 0, len(msgs)+2)
	walk(msgs, nil, func(m Message) { out = append(out, m) })
	return out
}

// walk checks msgs in order, telling report each problem and emit the
// repaired sequence; either may be nil.
func walk(msgs []Message, report func(i int, what string), emit func(Message)) {
	if report == nil {
		report = func(int, string) {}
	}
	if emit == nil {
		emit = func(Message) {}
	}
	var open []ToolCall // calls of the last assistant turn still unanswered
	answered := map[string]bool{}
	inTurn := false       // only results since the last assistant message with calls
	var carried []Message // stray results inside a turn, emitted once it closes
	closeTurn := func(i int) {
		for _, c := range open {
			if !answered[c.ID] {
				report(i, fmt.Sprintf("call %s (%s) has no result before this message", c.ID, c.Name))
				emit(Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, IsError: true,
					Content: "error: no result was recorded for this call"})
			}
		}
		for _, m := range carried {
			emit(m)
		}
		open, answered, inTurn, carried = nil, map[string]bool{}, false, nil
	}
	for i, m := range msgs {
		if m.Role == RoleTool {
			if inTurn && isOpen(open, m.ToolCallID) && !answered[m.ToolCallID] {
				answered[m.ToolCallID] = true
				emit(m)
				continue
			}
			report(i, fmt.Sprintf("tool result for %s answers no call of the assistant turn before it", m.ToolCallID))
			name := m.Name
			if name == "" {
				name = "tool"
			}
			u := Message{Role: RoleUser, Protected: m.Protected,
				Content: fmt.Sprintf("[runtime observation] Result of an earlier %s call (%s), carried over:\n%s", name, m.ToolCallID, m.Content)}
			if inTurn {
				carried = append(carried, u)
			} else {
				emit(u)
			}
			continue
		}
		closeTurn(i)
		emit(m)
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			open, inTurn = m.ToolCalls, true
		}
	}
	closeTurn(len(msgs))
}

func isOpen(calls []ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}
