package state

import (
	"encoding/json"
	"maps"
	"slices"
)

// stateJSON is a State as JSON: W_t and what the fold keeps to go on (the
// calls seen, each once, and the agents' last writers), so that a run's
// projection can be checkpointed and read back exactly.
type stateJSON struct {
	Files     map[string]FileState `json:"files"`
	Evidence  []Evidence           `json:"evidence"`
	Commands  []Command            `json:"commands"`
	Artifacts map[string]Artifact  `json:"artifacts"`
	Graph     Graph                `json:"graph"`
	Control   Control              `json:"control"`
	Seq       int64                `json:"seq"`
	Calls     []callJSON           `json:"calls"`
	ByKey     map[string]int       `json:"by_key"`  // calls' key -> index in Calls
	Writers   map[string]int       `json:"writers"` // writers' key -> index in Calls
}

type callJSON struct {
	Seq    int64       `json:"seq"`
	Agent  string      `json:"agent"`
	ID     string      `json:"id"`
	Tool   string      `json:"tool"`
	Turn   int         `json:"turn"`
	Args   string      `json:"args"`
	Inputs [][2]string `json:"inputs"`
	Cmd    int         `json:"cmd"`
	Action string      `json:"action"`
}

// MarshalJSON encodes the state whole.
func (s *State) MarshalJSON() ([]byte, error) {
	v := stateJSON{Files: s.Files, Evidence: s.Evidence, Commands: s.Commands, Artifacts: s.Artifacts, Graph: s.Graph,
		Control: s.Control, Seq: s.seq, ByKey: map[string]int{}, Writers: map[string]int{}}
	index := map[*call]int{}
	add := func(c *call) int {
		i, ok := index[c]
		if !ok {
			i = len(v.Calls)
			index[c] = i
			cj := callJSON{Seq: c.seq, Agent: c.agent, ID: c.id, Tool: c.tool, Turn: c.turn, Args: c.args, Cmd: c.cmd, Action: c.action}
			for _, in := range c.inputs {
				cj.Inputs = append(cj.Inputs, [2]string{in.path, in.hash})
			}
			v.Calls = append(v.Calls, cj)
		}
		return i
	}
	for _, k := range sortedKeys(s.calls) { // the same state, the same bytes
		v.ByKey[k] = add(s.calls[k])
	}
	for _, k := range sortedKeys(s.writers) {
		v.Writers[k] = add(s.writers[k])
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads a state MarshalJSON wrote; it then advances as the
// state it was.
func (s *State) UnmarshalJSON(data []byte) error {
	var v stateJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = *New()
	if v.Files != nil {
		s.Files = v.Files
	}
	if v.Evidence != nil {
		s.Evidence = v.Evidence
	}
	if v.Commands != nil {
		s.Commands = v.Commands
	}
	if v.Artifacts != nil {
		s.Artifacts = v.Artifacts
	}
	if v.Control.Manifest == nil {
		v.Control.Manifest = []string{}
	}
	s.Control, s.seq = v.Control, v.Seq
	for _, n := range v.Graph.Nodes {
		s.Graph.node(n)
	}
	for _, e := range v.Graph.Edges {
		s.Graph.edge(e)
	}
	calls := make([]*call, len(v.Calls))
	for i, cj := range v.Calls {
		c := &call{seq: cj.Seq, agent: cj.Agent, id: cj.ID, tool: cj.Tool, turn: cj.Turn, args: cj.Args, cmd: cj.Cmd, action: cj.Action}
		for _, in := range cj.Inputs {
			c.inputs = append(c.inputs, fileRef{in[0], in[1]})
		}
		calls[i] = c
	}
	for k, i := range v.ByKey {
		s.calls[k] = calls[i]
	}
	for k, i := range v.Writers {
		s.writers[k] = calls[i]
	}
	return nil
}

var _ json.Unmarshaler = (*State)(nil)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
