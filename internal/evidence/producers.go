package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/apodex/apodex/internal/record"
)

// Producers answers which tool last changed a file, from the run's record
// as it grows: a /workspace file a command produced is evidence when read,
// one the agent wrote itself is not. It reads only the events appended
// since its previous answer. Safe for concurrent use.
type Producers struct {
	dir string

	mu     sync.Mutex
	offset int64
	tools  map[string]string // call id -> tool name
	last   map[string]string // plane path -> tool name of its last change
}

// NewProducers follows the record in the run directory dir.
func NewProducers(dir string) *Producers {
	return &Producers{dir: dir, tools: map[string]string{}, last: map[string]string{}}
}

// ByCommand reports whether the last recorded change of planePath was made
// by a bash command.
func (p *Producers) ByCommand(planePath string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.catchUp()
	return p.last[planePath] == "bash"
}

func (p *Producers) catchUp() {
	f, err := os.Open(filepath.Join(p.dir, record.EventsFile))
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(p.offset, io.SeekStart); err != nil {
		return
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil { // a line still being written is read next time
			return
		}
		p.offset += int64(len(line))
		if !bytes.Contains(line, []byte(`"type":"tool_call"`)) && !bytes.Contains(line, []byte(`"type":"file_delta"`)) {
			continue
		}
		var e struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Name   string `json:"name"`
			Path   string `json:"path"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch e.Type {
		case record.TypeToolCall:
			p.tools[e.CallID] = e.Name
		case record.TypeFileDelta:
			p.last[e.Path] = p.tools[e.CallID]
		}
	}
}
