package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/apodex/apodex/internal/clock"
)

// ErrNoRetryBudget is wrapped, together with the last model error, when the
// next retry's wait would end at or past the context's deadline.
var ErrNoRetryBudget = errors.New("llm: the wall-clock budget does not allow another retry")

// RetryPolicy configures WithRetry. The zero value is usable: every zero
// field takes the default named on it. Clock, sleep and randomness are
// injected so tests and replays never depend on real time.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts including the first;
	// default 6. 1 disables retrying.
	MaxAttempts int
	// BaseDelay is the backoff unit; default 500ms. After failed attempt n
	// the backoff is d = BaseDelay*2^(n-1), capped at MaxDelay, and the wait
	// is drawn uniformly from [d/2, d].
	BaseDelay time.Duration
	// MaxDelay caps a computed backoff (not a provider's Retry-After);
	// default 30s.
	MaxDelay time.Duration
	// Rand returns a number in [0, 1); default math/rand/v2.Float64.
	Rand func() float64
	// Clock times the waits and is the time compared with ctx's deadline;
	// nil is the system clock (tests pass a clock.Fake).
	Clock clock.Clock
	// OnRetry, if set, is called before each wait with the number of the
	// attempt that just failed (1 for the first, so it is also the retry's
	// ordinal), its error and the wait about to be slept.
	OnRetry func(attempt int, err error, wait time.Duration)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	p.Clock = clock.Or(p.Clock)
	return p
}

// backoff returns the jittered wait after failed attempt n (1-based).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		if d > p.MaxDelay/2 {
			d = p.MaxDelay
			break
		}
		d *= 2
	}
	d = min(d, p.MaxDelay)
	r := p.Rand()
	r = max(0, min(r, 1))
	half := d / 2
	// min guards float rounding at the top of huge ranges.
	return min(half+time.Duration(r*float64(d-half)), d)
}

// WithRetry returns a Model that retries m's retryable errors (IsRetryable)
// with exponential backoff, or the provider's Retry-After hint when the error
// carries one. It never retries once ctx is done and never starts a wait that
// would end at or past ctx's deadline; it returns ErrNoRetryBudget wrapped
// with the last error instead. Every returned error still matches the last
// model error with errors.Is and errors.As.
func WithRetry(m Model, p RetryPolicy) Model {
	return &retrying{m: m, p: p.withDefaults()}
}

type retrying struct {
	m Model
	p RetryPolicy
}

func (r *retrying) Generate(ctx context.Context, req *Request) (*Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := r.m.Generate(ctx, req)
		if err == nil {
			return resp, nil
		}
		if !IsRetryable(err) || ctx.Err() != nil {
			return nil, err
		}
		if attempt >= r.p.MaxAttempts {
			return nil, fmt.Errorf("llm: giving up after %d attempts: %w", attempt, err)
		}
		var bad *BadStreamError
		if errors.As(err, &bad) && attempt >= maxBadStreamAttempts {
			return nil, fmt.Errorf("llm: giving up after %d attempts that were not streams: %w", attempt, err)
		}
		wait := retryAfter(err)
		if wait <= 0 {
			wait = r.p.backoff(attempt)
		}
		if dl, ok := ctx.Deadline(); ok {
			left := dl.Sub(r.p.Clock.Now())
			if wait >= left {
				return nil, fmt.Errorf("%w (attempt %d failed; the next would wait %v but only %v is left; raise the time budget): %w",
					ErrNoRetryBudget, attempt, wait, max(left, 0), err)
			}
		}
		if r.p.OnRetry != nil {
			r.p.OnRetry(attempt, err, wait)
		}
		if serr := clock.Sleep(ctx, r.p.Clock, wait); serr != nil {
			return nil, fmt.Errorf("llm: retry wait after attempt %d interrupted: %w: %w", attempt, serr, err)
		}
	}
}
