package trajectory

import (
	"encoding/json"
	"fmt"
	"sort"
)

// link names the conversations and says who started each: a dispatched
// subagent its dispatch call (the assignment event names it); an agent
// the runtime started (verifier, investigator, writer) the parent's call
// that was running when its first request was made — a verify call whose
// claim its prompt states, else the finish (or report) whose gate ran an
// effort wave or the writer, else the latest call then running.
func (r *Run) link(cs []*conv, top string, roles, parents, dispatch map[string]string) {
	seen := map[string]int{}
	owner := map[string]*Conversation{} // agent + call id -> the conversation that made the call
	firstOf := map[string]*Conversation{}
	for _, x := range cs {
		c := x.c
		seen[c.Agent]++
		c.ID = r.ID + "/" + c.Agent
		if k := seen[c.Agent]; k > 1 {
			c.ID += fmt.Sprintf(".%d", k)
		}
		if firstOf[c.Agent] == nil {
			firstOf[c.Agent] = c
		}
		c.Role = roles[c.Agent]
		if c.Role == "" {
			c.Role = runtimeRole(c.Agent)
		}
		for _, s := range c.Segments {
			for _, call := range s.Calls {
				for _, tc := range call.Reply.ToolCalls {
					owner[c.Agent+"\x00"+tc.ID] = c
				}
			}
		}
	}
	calls := r.Calls()
	taken := map[*Call]bool{}
	for _, x := range cs {
		c := x.c
		if c.Agent == top && c == firstOf[top] {
			continue
		}
		// A call on record (a dispatch, a verify) started it; an agent the
		// gate started (investigator, writer) names none: found below.
		if p, ok := parents[c.Agent]; ok && c == firstOf[c.Agent] && dispatch[c.Agent] != "" {
			c.StartedBy = dispatch[c.Agent]
			if pc := owner[p+"\x00"+c.StartedBy]; pc != nil {
				c.Parent = pc.ID
			} else if pc := firstOf[p]; pc != nil {
				c.Parent = pc.ID
			}
			continue
		}
		if start := startingCall(c, parents[c.Agent], x.c.firstSeq, calls, taken); start != nil {
			taken[start] = true
			c.StartedBy = start.CallID
			if pc := owner[start.Agent+"\x00"+start.CallID]; pc != nil {
				c.Parent = pc.ID
			}
		}
		if c.Parent == "" && firstOf[top] != nil && c != firstOf[top] {
			c.Parent = firstOf[top].ID
		}
	}
	top1 := firstOf[top]
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i].c, cs[j].c
		if (a == top1) != (b == top1) {
			return a == top1
		}
		return a.firstSeq < b.firstSeq
	})
	for _, x := range cs {
		r.Conversations = append(r.Conversations, x.c)
	}
}

// startingCall is the call that started c: for an effort investigator or
// the writer, its parent's latest finish (or report) before its first
// request — the gate starts them after the call's result, while the lead
// goes on —;
// otherwise the call that was running when c made its first request.
func startingCall(c *Conversation, parent string, first int64, calls []*Call, taken map[*Call]bool) *Call {
	var running []*Call
	var lastFinish *Call
	for _, k := range calls {
		if k.Agent == c.Agent || k.Seq >= first {
			continue
		}
		if (k.Name == "finish" || k.Name == "report") && (parent == "" || k.Agent == parent) && (lastFinish == nil || k.Seq > lastFinish.Seq) {
			lastFinish = k
		}
		if k.ResultSeq == 0 || k.ResultSeq > first {
			running = append(running, k)
		}
	}
	if (c.Role == "investigator" || c.Role == "writer") && lastFinish != nil {
		return lastFinish
	}
	if len(running) == 0 {
		return nil
	}
	claim := claimOf(c)
	var verify, finish *Call
	for _, k := range running {
		switch k.Name {
		case "verify":
			if taken[k] {
				continue
			}
			var a struct {
				Claim string `json:"claim"`
			}
			json.Unmarshal([]byte(k.Arguments), &a)
			if claim != "" && a.Claim == claim {
				return k
			}
			if verify == nil && claim != "" {
				verify = k
			}
		case "finish", "report":
			finish = k
		}
	}
	switch {
	case finish != nil:
		return finish // an effort wave's verifier states a claim too
	case verify != nil:
		return verify
	}
	return running[len(running)-1]
}
