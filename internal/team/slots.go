package team

import (
	"slices"
	"sync"
)

// slots bounds running assignments. Tickets are taken at dispatch, under the
// team's lock, and granted strictly in that order as slots free: queued
// assignments start in dispatch order whatever the goroutine scheduling.
type slots struct {
	mu    sync.Mutex
	free  int
	queue []chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// ticket returns a channel closed when the holder may run.
func (s *slots) ticket() chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && len(s.queue) == 0 {
		s.free--
		close(ch)
	} else {
		s.queue = append(s.queue, ch)
	}
	return ch
}

// release frees a granted slot for the next ticket in line.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		close(s.queue[0])
		s.queue = s.queue[1:]
		return
	}
	s.free++
}

// abandon gives up a ticket: out of the line if still waiting, else its
// granted slot goes to the next.
func (s *slots) abandon(ch chan struct{}) {
	s.mu.Lock()
	if i := slices.Index(s.queue, ch); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.release()
}
