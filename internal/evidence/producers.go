package evidence

import (
	"sync"

	"github.com/apodex/apodex/internal/record"
)

// Producers answers which tool last changed a file, from the run's log as
// it grows (in this process, record.Log.Cursor: no file is polled): a
// /workspace file a command produced is evidence when read, one the agent
// wrote itself is not. Each answer takes in every tool call and file
// change appended before it. Safe for concurrent use.
type Producers struct {
	mu    sync.Mutex
	cur   *record.Cursor
	err   error             // the cursor failed: nothing counts as produced by a command
	tools map[string]string // call id -> tool name
	last  map[string]string // plane path -> tool name of its last change
}

// NewProducers follows log from its first event.
func NewProducers(log *record.Log) *Producers {
	p := &Producers{tools: map[string]string{}, last: map[string]string{}}
	p.cur, p.err = log.Cursor(0, record.TypeToolCall, record.TypeFileDelta)
	return p
}

// ByCommand reports whether the last recorded change of planePath was made
// by a bash command.
func (p *Producers) ByCommand(planePath string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.catchUp()
	return p.err == nil && p.last[planePath] == "bash"
}

func (p *Producers) catchUp() {
	if p.err != nil {
		return
	}
	evs, err := p.cur.Next()
	if err != nil && err != record.ErrClosed {
		p.err = err
	}
	for _, e := range evs {
		pl, err := record.DecodePayload(e)
		if err != nil {
			continue // the runtime wrote it: it decodes
		}
		switch pl := pl.(type) {
		case *record.ToolCall:
			p.tools[pl.CallID] = pl.Name
		case *record.FileDelta:
			p.last[pl.Path] = p.tools[pl.CallID]
		}
	}
}
