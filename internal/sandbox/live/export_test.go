package live

import (
	"context"
	"errors"
	"time"

	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// LiveCount is how many live sandboxes p has up.
func LiveCount(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lives)
}

// Used counts the commands p ran in a live sandbox.
func Used(p *Pool) int64 { return p.used.Load() }

// WarmStarts counts the commands p's live sandboxes started warm.
func WarmStarts(p *Pool) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for _, lv := range p.lives {
		n += lv.warmStarts.Load()
	}
	return n
}

// KillServer kills the server of one of p's live sandboxes, waits until
// the runner noticed, and reports whether that sandbox still ran a
// command given to it.
func KillServer(p *Pool) (ran bool, err error) {
	p.mu.Lock()
	var lv *live
	for _, l := range p.lives {
		lv = l
	}
	p.mu.Unlock()
	if lv == nil {
		return false, errors.New("no live sandbox")
	}
	_ = lv.proc.Kill()
	for i := 0; !lv.gone(); i++ {
		if i > 500 {
			return false, errors.New("the runner did not notice the server died")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := command.New(context.Background(), spec.Spec{Command: "true"})
	if err != nil {
		return false, err
	}
	_, _, ran = lv.run(context.Background(), c)
	return ran, nil
}

// RefuseStarts makes every new live sandbox of p fail to start, until
// restore.
func RefuseStarts(p *Pool) (restore func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start = func(*Pool, shape) (*live, error) { return nil, errors.New("refused by the test") }
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.start = startLive
	}
}

// ForgetStartError clears p's StartError.
func ForgetStartError(p *Pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = nil
}
