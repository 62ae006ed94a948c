package agent

import (
	"context"
	"fmt"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// callFitting makes one model call. When the provider refuses the prompt as
// longer than the model's context window, that is a state, not a failure:
// the window is learned from what the provider said (so later compactions
// start earlier), the history is compacted one tier further — tier 1, then
// tier 2 — and the turn is tried again, once per tier. Only when no tier
// can shrink the history does the overflow end the loop.
func (l *loop) callFitting(ctx context.Context, model llm.Model) (*llm.Response, error) {
	resp, err := l.call(ctx, model)
	tier := 1
	for err != nil && ctx.Err() == nil {
		o, over := llm.IsContextOverflow(err)
		if !over {
			break
		}
		l.uncall()
		for tier <= 2 && !l.shrinkForOverflow(ctx, model, o, err, tier) {
			tier++
		}
		if tier > 2 {
			return nil, fmt.Errorf("the prompt is longer than the model's context window and compaction cannot shrink it further (see the compaction events): %w", err)
		}
		tier++
		resp, err = l.call(ctx, model)
	}
	return resp, err
}

// uncall takes back the turn a refused call counted: the retry is the same
// turn, so turn numbers and budgets see one call.
func (l *loop) uncall() {
	l.turns--
	if n := len(l.starts); n > 0 {
		l.starts = l.starts[:n-1]
	}
}

// shrinkForOverflow learns the window from an overflow answer and runs one
// compaction tier for it; it reports whether the history got smaller.
func (l *loop) shrinkForOverflow(ctx context.Context, model llm.Model, o llm.Overflow, err error, tier int) bool {
	before, estimated := l.promptTokens()
	window := o.Limit
	if window <= 0 {
		// The provider named no window: the prompt it refused did not fit,
		// so the window is smaller than that prompt.
		size := before
		if o.Prompt > 0 {
			size = o.Prompt
		}
		window = size * 9 / 10
	}
	if l.compact == nil {
		// Compaction was off: the provider's answer turns it on.
		ev := NewEvicted()
		l.tools = l.tools.With(ev.Tool())
		l.compact = &compactor{cfg: Context{Window: window}.WithDefaults(), evicted: ev}
	}
	c := l.compact
	if c.cfg.Window <= 0 || window < c.cfg.Window {
		c.cfg.Window = window
	}
	c.quietUntil = 0
	why := &record.Compaction{Reason: record.ReasonProviderOverflow, ProviderError: err.Error()}
	after := l.compactTier(ctx, model, tier, before, estimated, why)
	return after < before
}
