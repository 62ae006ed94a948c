package limits

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Events are the counters of a cgroup that grow when a limit is hit.
type Events struct{ memory, pids int64 }

// Counters reads a live sandbox's cgroup counters through descriptors
// opened once; Last is what the latest reading said.
type Counters struct {
	files []cgFile
	mu    sync.Mutex
	prev  Events
}

type cgFile struct {
	f      *os.File
	pids   bool   // counts toward pids, else memory
	key    string // the line's key, "" for a file that is one number
	counts []string
}

// NewCounters opens the counters of cg.
func NewCounters(cg *Cgroup) *Counters {
	c := &Counters{}
	add := func(dir, file string, pids bool, keys ...string) {
		f, err := os.Open(dir + "/" + file)
		if err != nil {
			return
		}
		c.files = append(c.files, cgFile{f: f, pids: pids, counts: keys})
	}
	if d := cg.v1["memory"]; d != "" {
		add(d, "memory.oom_control", false, "oom_kill")
		add(d, "memory.failcnt", false, "")
	}
	if cg.memory == "cgroup-v2" {
		add(cg.v2, "memory.events", false, "oom_kill", "max")
	}
	if d := cg.v1["pids"]; d != "" {
		add(d, "pids.events", true, "max")
	}
	if cg.pids == "cgroup-v2" {
		add(cg.v2, "pids.events", true, "max")
	}
	c.prev = c.read()
	return c
}

func (c *Counters) read() Events {
	var e Events
	buf := make([]byte, 1024)
	for _, f := range c.files {
		n, _ := f.f.ReadAt(buf, 0)
		text := string(buf[:n])
		var sum int64
		for _, k := range f.counts {
			if k == "" {
				v, _ := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
				sum += v
			} else {
				sum += countKey(text, k)
			}
		}
		if f.pids {
			e.pids += sum
		} else {
			e.memory += sum
		}
	}
	return e
}

// Last is the latest reading.
func (c *Counters) Last() Events {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prev
}

// HitSince reads the counters and names the limit whose counters grew
// since before ("" none).
func (c *Counters) HitSince(before Events) string {
	now := c.read()
	c.mu.Lock()
	c.prev = now
	c.mu.Unlock()
	switch {
	case now.memory > before.memory:
		return spec.LimitMemory
	case now.pids > before.pids:
		return spec.LimitPids
	}
	return ""
}

// Close lets the counters' descriptors go.
func (c *Counters) Close() {
	for _, f := range c.files {
		f.f.Close()
	}
}

// countKey reads the value of key in a "key value" per line file.
func countKey(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
