package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told (Advance, Set). It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed when a timer is added
}

var _ Clock = (*Fake)(nil)

// NewFake starts a fake clock at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c    *Fake
	at   time.Time
	ch   chan time.Time
	f    func()
	done bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.c.remove(t)
	t.c.signal()
	return true
}

// Now is the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer makes a timer that fires when the clock reaches now+d.
func (c *Fake) NewTimer(d time.Duration) Timer { return c.add(d, nil) }

// AfterFunc calls f (in its own goroutine) when the clock reaches now+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer { return c.add(d, f) }

func (c *Fake) add(d time.Duration, f func()) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.timers = append(c.timers, t)
	c.signal()
	if d <= 0 {
		c.fireDue()
	}
	return t
}

// Advance moves the clock by d, firing every timer due by then.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireDue()
}

// Timers is the number of timers waiting to fire.
func (c *Fake) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers blocks until at least n timers are waiting: a test calls it
// before Advance, so the code under test has set the timer the advance
// must fire. It returns false if done is closed first.
func (c *Fake) WaitTimers(n int, done <-chan struct{}) bool {
	return c.WaitFor(func(timers int) bool { return timers >= n }, done)
}

// WaitFor blocks until ok holds of the number of waiting timers (checked
// whenever a timer is added, stopped or fired); false if done closes first.
func (c *Fake) WaitFor(ok func(timers int) bool, done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if ok(len(c.timers)) {
			c.mu.Unlock()
			return true
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// signal wakes WaitFor; c.mu is held.
func (c *Fake) signal() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// fireDue fires the timers due at c.now, earliest first; c.mu is held.
func (c *Fake) fireDue() {
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.done = true
		c.signal()
		if t.f != nil {
			go t.f()
		} else {
			t.ch <- c.now
		}
	}
}

func (c *Fake) remove(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}
