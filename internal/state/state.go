// Package state derives the workspace state W_t = (F, Q, C, I, G, K) of
// SPEC R-PLANE-3 from a run's record, so that the coordinator and the user
// can ask what was produced, from what, and what is still missing.
//
// Guarantees:
//   - the state is a pure fold over record events: no clock, no file system,
//     no blob reads; the same events give the same state, and applying them
//     one by one with Apply gives exactly what FromRecord gives;
//   - Apply takes events in increasing seq order and refuses any other;
//     unknown event types are ignored; a known event whose payload does not
//     decode is refused with an error and changes nothing;
//   - F holds the run's inputs and every file named by a file_delta, at its
//     last hash (a delta without an "after" hash deletes the file); I is the
//     part of F under /workspace and /outputs that a tool call produced,
//     with its last producer;
//   - actions are named tool#seq, where seq is the seq of the tool_call
//     event; Step fields use that same seq;
//   - Q gets one item per successful read_file and per grep with at least
//     one match, of any plane path (a read of /outputs/scratch is as real a
//     source as one of /inputs); its files are those grep's shown lines name;
//   - every input and context edge points from something that existed
//     before the action to the action; a provenance walk goes from a file
//     version to the first action that produced it, so it only moves back
//     in seq order; it is also depth- and size-limited and never revisits
//     an action on the chain it is walking.
//
// Edge rules (how "from what" is decided):
//   - input: a file version (path@hash) the action names or edits: for bash,
//     every plane path written in the command text (/inputs/..,
//     /workspace/.., /outputs/..; a glob matches the known files; a relative
//     path counts when /workspace/<path> is a known file) that was in F when
//     the call was made, except the target of a truncating ">" redirect;
//     for edit_file, the version it edited;
//   - context: for actions whose content the model wrote (write_file,
//     edit_file, any tool other than bash), the evidence the same agent
//     obtained in its previous ContextTurns turns. Calls of the same turn
//     are excluded on purpose: they were issued together, before the model
//     saw their results. Context edges are weaker: a provenance chain follows
//     input edges and falls back to context edges only when an action has no
//     input, and then marks the hop "[context]";
//   - read: a file version that a read_file or grep result (evidence) came
//     from; wrote: an action to the file version it produced.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// ContextTurns is how many earlier turns of an agent count as context.
const ContextTurns = 2

// ErrOrder: an event was applied out of seq order.
var ErrOrder = errors.New("state: event out of seq order")

// State is W_t. Read it, do not modify it; use Apply to advance it.
type State struct {
	Files     map[string]FileState `json:"files"`     // F, by plane path
	Evidence  []Evidence           `json:"evidence"`  // Q, E1, E2, … in order
	Commands  []Command            `json:"commands"`  // C, every bash call
	Artifacts map[string]Artifact  `json:"artifacts"` // I, by plane path
	Graph     Graph                `json:"graph"`     // G
	Control   Control              `json:"control"`   // K

	seq   int64
	calls map[string]*call // by agent and call id; the latest call wins
	// writers is each agent's last call that wrote a path (agent, path).
	writers map[string]*call
}

// FileState is one file of F.
type FileState struct {
	Hash       string `json:"hash"`
	Bytes      int64  `json:"bytes"`
	Step       int64  `json:"step"` // the producing tool_call's seq (run_started's for inputs)
	Agent      string `json:"agent,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	ContentRef string `json:"content_ref,omitempty"`
}

// Evidence is one retrieval result of Q.
type Evidence struct {
	ID     string    `json:"id"`     // E1, E2, …
	Source string    `json:"source"` // the path asked for ("/" for every plane)
	Files  []string  `json:"files"`  // the files the text came from
	Tool   string    `json:"tool"`
	CallID string    `json:"call_id"`
	Agent  string    `json:"agent"`
	Seq    int64     `json:"seq"`
	Turn   int       `json:"turn"`
	Time   time.Time `json:"time"`
	Text   string    `json:"text"`          // exactly what the agent was shown
	Ref    string    `json:"ref,omitempty"` // blob of the full body when Text was cut
}

// Command is one bash call of C.
type Command struct {
	Seq        int64    `json:"seq"`
	Agent      string   `json:"agent"`
	CallID     string   `json:"call_id"`
	Turn       int      `json:"turn"`
	Command    string   `json:"command"`
	Done       bool     `json:"done"` // false: the record ends before its result
	ExitCode   int      `json:"exit_code"`
	DurationMS int64    `json:"duration_ms"`
	TimedOut   bool     `json:"timed_out,omitempty"`
	Error      string   `json:"error,omitempty"` // the command could not run
	OutputRef  string   `json:"output_ref"`      // a blob, or "inline" in the event
	Bytes      int      `json:"bytes"`
	Changed    []string `json:"changed,omitempty"` // paths of its file deltas
}

// Artifact is one entry of I.
type Artifact struct {
	Path       string `json:"path"`
	Hash       string `json:"hash"`
	Bytes      int64  `json:"bytes"`
	Producer   string `json:"producer"` // agent
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Action     string `json:"action"` // tool#seq
	Step       int64  `json:"step"`
	ContentRef string `json:"content_ref,omitempty"`
}

// call is a tool call seen in the record.
type call struct {
	seq    int64
	agent  string
	id     string
	tool   string
	turn   int
	args   string
	inputs []fileRef // files it used, as they were when it was made
	cmd    int       // index in Commands, or -1
	action string    // graph node id once it wrote a file
}

type fileRef struct{ path, hash string }

// New is the state before any event.
func New() *State {
	return &State{Files: map[string]FileState{}, Evidence: []Evidence{}, Commands: []Command{}, Artifacts: map[string]Artifact{},
		Graph: newGraph(), Control: Control{Manifest: []string{}}, calls: map[string]*call{}, writers: map[string]*call{}}
}

// FromRecord folds events into a state. On error it returns the state up to
// the offending event.
func FromRecord(events []record.Event) (*State, error) {
	s := New()
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Apply advances the state by one event.
func (s *State) Apply(e record.Event) error {
	if e.Seq <= s.seq {
		return fmt.Errorf("%w: seq %d after %d", ErrOrder, e.Seq, s.seq)
	}
	var p any
	if record.Known(e.Type) {
		var err error
		if p, err = record.DecodePayload(e); err != nil {
			return err
		}
	}
	return s.ApplyPayload(e, p)
}

// ApplyPayload advances the state by one event whose payload p is decoded
// already (record.DecodePayload; nil for a type this version does not
// know): runstate's one Apply calls it.
func (s *State) ApplyPayload(e record.Event, p any) error {
	if e.Seq <= s.seq {
		return fmt.Errorf("%w: seq %d after %d", ErrOrder, e.Seq, s.seq)
	}
	switch p := p.(type) {
	case *record.RunStarted:
		s.runStarted(e, p)
	case *record.ToolCall:
		s.toolCall(e, p)
	case *record.ToolResult:
		s.toolResult(e, p)
	case *record.FileDelta:
		s.fileDelta(e, p)
	case *record.Lease:
		s.lease(e, p)
	case *record.Delivery:
		d := *p
		s.Control.Delivery = &d
	}
	s.seq = e.Seq
	return nil
}

func (s *State) runStarted(e record.Event, rs *record.RunStarted) {
	for _, in := range rs.Inputs {
		s.Files[in.Path] = FileState{Hash: in.SHA256, Bytes: in.Bytes, Step: e.Seq}
	}
}

func (s *State) toolCall(e record.Event, tc *record.ToolCall) {
	c := &call{seq: e.Seq, agent: e.Agent, id: tc.CallID, tool: tc.Name, turn: tc.Turn, args: tc.Arguments, cmd: -1}
	if tc.Name == "bash" {
		var a struct {
			Command string `json:"command"`
		}
		json.Unmarshal([]byte(tc.Arguments), &a) // bad JSON: the call failed, the command is empty
		for _, p := range commandPaths(a.Command, s.Files) {
			c.inputs = append(c.inputs, fileRef{p, s.Files[p].Hash})
		}
		c.cmd = len(s.Commands)
		s.Commands = append(s.Commands, Command{Seq: e.Seq, Agent: e.Agent, CallID: tc.CallID, Turn: tc.Turn, Command: a.Command, ExitCode: -1})
	}
	s.calls[callKey(e.Agent, tc.CallID)] = c
}

func (s *State) toolResult(e record.Event, tr *record.ToolResult) {
	c := s.callOf(e, tr.CallID, tr.Name)
	if c.cmd >= 0 {
		cmd := &s.Commands[c.cmd]
		cmd.Done, cmd.OutputRef, cmd.Bytes = true, "inline", len(tr.Output)
		if tr.FullRef != "" {
			cmd.OutputRef, cmd.Bytes = tr.FullRef, tr.FullBytes
		}
		if m := tr.Meta; m != nil && m.ExitCode != nil {
			cmd.ExitCode = *m.ExitCode
			cmd.DurationMS = m.DurationMS
			cmd.TimedOut = m.TimedOut
		} else {
			cmd.DurationMS = tr.DurationMS
			if tr.IsError {
				cmd.Error = tr.Output
			}
		}
	}
	if !tr.IsError {
		s.retrieved(e, c, tr)
	}
}

// retrieved turns a successful read into evidence.
func (s *State) retrieved(e record.Event, c *call, tr *record.ToolResult) {
	var a struct {
		Path string `json:"path"`
	}
	json.Unmarshal([]byte(c.args), &a)
	source, files := "", []string(nil)
	switch c.tool {
	case "read_file":
		source, _ = planePath(a.Path)
		if source != "" {
			files = []string{source}
		}
	case "grep":
		source = "/"
		if a.Path != "" {
			source, _ = planePath(a.Path)
		}
		files = grepFiles(tr.Output)
	}
	if source == "" || len(files) == 0 {
		return
	}
	ev := Evidence{ID: fmt.Sprintf("E%d", len(s.Evidence)+1), Source: source, Files: files, Tool: c.tool, CallID: c.id,
		Agent: c.agent, Seq: c.seq, Turn: c.turn, Time: e.Time, Text: tr.Output, Ref: tr.FullRef}
	s.Evidence = append(s.Evidence, ev)
	s.Graph.node(Node{ID: ev.ID, Kind: KindEvidence, Tool: c.tool, Seq: c.seq, Agent: c.agent})
	for _, f := range files {
		from := s.Graph.fileNode(f, s.Files[f].Hash)
		s.Graph.edge(Edge{From: from, To: ev.ID, Kind: EdgeRead, Seq: e.Seq})
	}
}

func (s *State) fileDelta(e record.Event, d *record.FileDelta) {
	p, ok := planePath(d.Path)
	if !ok {
		p = d.Path
	}
	c := s.callOf(e, d.CallID, "")
	if strings.HasPrefix(d.CallID, "merge:") {
		// A subagent's private change reaching the shared workspace: the
		// action that made it is the agent's last write of that path.
		if w, ok := s.writers[callKey(e.Agent, p)]; ok {
			c = w
		}
	} else {
		s.writers[callKey(e.Agent, p)] = c
	}
	action := s.actionNode(c, e, p, d.Before)
	if c.cmd >= 0 {
		s.Commands[c.cmd].Changed = append(s.Commands[c.cmd].Changed, p)
	}
	if d.After == "" {
		delete(s.Files, p)
		delete(s.Artifacts, p)
		return
	}
	s.Files[p] = FileState{Hash: d.After, Bytes: d.Bytes, Step: c.seq, Agent: c.agent, CallID: c.id, ContentRef: d.ContentRef}
	s.Graph.edge(Edge{From: action, To: s.Graph.fileNode(p, d.After), Kind: EdgeWrote, Seq: e.Seq})
	if under(p, "/workspace") || under(p, "/outputs") {
		s.Artifacts[p] = Artifact{Path: p, Hash: d.After, Bytes: d.Bytes, Producer: c.agent, CallID: c.id, Tool: c.tool,
			Action: action, Step: c.seq, ContentRef: d.ContentRef}
	}
}

// actionNode adds the call's node and its source edges the first time it
// writes a file, and returns the node's id.
func (s *State) actionNode(c *call, e record.Event, path, before string) string {
	if c.action == "" {
		c.action = fmt.Sprintf("%s#%d", c.tool, c.seq)
		s.Graph.node(Node{ID: c.action, Kind: KindAction, Tool: c.tool, Seq: c.seq, Agent: c.agent})
		for _, in := range c.inputs {
			s.Graph.edge(Edge{From: s.Graph.fileNode(in.path, in.hash), To: c.action, Kind: EdgeInput, Seq: e.Seq})
		}
		if c.tool != "bash" {
			for _, ev := range s.Evidence {
				if ev.Agent == c.agent && ev.Turn < c.turn && ev.Turn >= c.turn-ContextTurns {
					s.Graph.edge(Edge{From: ev.ID, To: c.action, Kind: EdgeContext, Seq: e.Seq})
				}
			}
		}
	}
	if c.tool == "edit_file" && before != "" {
		s.Graph.edge(Edge{From: s.Graph.fileNode(path, before), To: c.action, Kind: EdgeInput, Seq: e.Seq})
	}
	return c.action
}

// callOf finds the call an event belongs to; a result or delta without its
// tool_call (a damaged record) gets a call named after itself.
func (s *State) callOf(e record.Event, id, tool string) *call {
	if c, ok := s.calls[callKey(e.Agent, id)]; ok {
		return c
	}
	if tool == "" {
		tool = "unknown"
	}
	c := &call{seq: e.Seq, agent: e.Agent, id: id, tool: tool, cmd: -1}
	s.calls[callKey(e.Agent, id)] = c
	return c
}

func callKey(agent, id string) string { return agent + "\x00" + id }

// number reads a JSON number from a decoded map.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
