package llm

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
)

// fakeClock is an injected clock whose timers fire at once: a wait only
// moves its time on, and is recorded.
type fakeClock struct {
	now    time.Time
	sleeps []time.Duration
}

var _ clock.Clock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return firedTimer{ch}
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.now = c.now.Add(d)
	go f()
	return firedTimer{}
}

// firedTimer is a timer of fakeClock: it has fired.
type firedTimer struct{ ch chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.ch }
func (t firedTimer) Stop() bool          { return false }

func (c *fakeClock) slept() time.Duration {
	var total time.Duration
	for _, d := range c.sleeps {
		total += d
	}
	return total
}

// sequence is a fake Model that fails with errs in order; a nil entry (or
// running past the end) answers successfully.
type sequence struct {
	errs  []error
	calls int
}

func (s *sequence) Generate(ctx context.Context, req *Request) (*Response, error) {
	i := s.calls
	s.calls++
	if i < len(s.errs) && s.errs[i] != nil {
		return nil, s.errs[i]
	}
	return &Response{Message: Message{Role: RoleAssistant, Content: "ok"}}, nil
}

func status(code int) error {
	return &APIError{StatusCode: code, URL: "http://model.test/v1", Message: "fake"}
}

type retryCall struct {
	attempt int
	wait    time.Duration
}

func TestWithRetry(t *testing.T) {
	conn := &ConnError{URL: "http://model.test/v1", Err: io.ErrUnexpectedEOF}
	limited := &APIError{StatusCode: 429, URL: "http://model.test/v1", RetryAfter: 7 * time.Second}
	tests := []struct {
		name      string
		errs      []error
		policy    RetryPolicy
		budget    time.Duration // 0: no deadline
		wantCalls int
		wantSleep []time.Duration
		wantErr   []error  // each must match with errors.Is
		wantText  []string // each must appear in the error
		wantAs    int      // APIError status the error must carry, 0 to skip
	}{
		{
			name:      "429 then success",
			errs:      []error{status(429)},
			wantCalls: 2,
			wantSleep: []time.Duration{time.Second},
		},
		{
			name:      "retry-after honoured and not capped by MaxDelay",
			errs:      []error{limited},
			policy:    RetryPolicy{MaxDelay: time.Second},
			wantCalls: 2,
			wantSleep: []time.Duration{7 * time.Second},
		},
		{
			name:      "retry-after past the deadline",
			errs:      []error{limited},
			budget:    5 * time.Second,
			wantCalls: 1,
			wantErr:   []error{ErrNoRetryBudget, limited},
			wantAs:    429,
		},
		{
			// Waits 1s, 2s (3s used); the next 4s would end at 7s > 5s.
			name:      "500s until the deadline budget ends",
			errs:      []error{status(500), status(500), status(500), status(500), status(500), status(500)},
			budget:    5 * time.Second,
			wantCalls: 3,
			wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantErr:   []error{ErrNoRetryBudget},
			wantText:  []string{"wall-clock budget", "HTTP 500"},
			wantAs:    500,
		},
		{
			// A wait ending exactly at the deadline is refused too.
			name:      "wait ending exactly at the deadline",
			errs:      []error{status(503), status(503)},
			budget:    3 * time.Second,
			wantCalls: 2,
			wantSleep: []time.Duration{time.Second},
			wantErr:   []error{ErrNoRetryBudget},
			wantAs:    503,
		},
		{
			name:      "400 returns at once",
			errs:      []error{status(400)},
			wantCalls: 1,
			wantAs:    400,
		},
		{
			name:      "401 returns at once",
			errs:      []error{status(401)},
			wantCalls: 1,
			wantAs:    401,
		},
		{
			name:      "conn error retried",
			errs:      []error{conn, conn},
			wantCalls: 3,
			wantSleep: []time.Duration{time.Second, 2 * time.Second},
		},
		{
			name:      "truncated stream retried",
			errs:      []error{ErrTruncated},
			wantCalls: 2,
			wantSleep: []time.Duration{time.Second},
		},
		{
			name:      "empty reply retried",
			errs:      []error{ErrEmpty},
			wantCalls: 2,
			wantSleep: []time.Duration{time.Second},
		},
		{
			name:      "malformed reply not retried",
			errs:      []error{ErrMalformed},
			wantCalls: 1,
			wantErr:   []error{ErrMalformed},
		},
		{
			name:      "gives up after MaxAttempts",
			errs:      []error{status(502), status(502), status(502), status(502)},
			policy:    RetryPolicy{MaxAttempts: 3},
			wantCalls: 3,
			wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantText:  []string{"after 3 attempts"},
			wantAs:    502,
		},
		{
			name:      "backoff capped by MaxDelay",
			errs:      []error{ErrTruncated, ErrTruncated, ErrTruncated, ErrTruncated},
			policy:    RetryPolicy{MaxDelay: 3 * time.Second},
			wantCalls: 5,
			wantSleep: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second},
		},
		{
			name:      "MaxAttempts 1 disables retrying",
			errs:      []error{status(429)},
			policy:    RetryPolicy{MaxAttempts: 1},
			wantCalls: 1,
			wantText:  []string{"after 1 attempts"},
			wantAs:    429,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			clock := &fakeClock{now: start}
			ctx := context.Background()
			if tt.budget > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, start.Add(tt.budget))
				defer cancel()
			}
			var retries []retryCall
			p := tt.policy
			p.BaseDelay = time.Second
			p.Rand = func() float64 { return 1 } // the top of the jitter range
			p.Clock = clock
			p.OnRetry = func(attempt int, err error, wait time.Duration) {
				if !IsRetryable(err) {
					t.Errorf("OnRetry got a non-retryable error: %v", err)
				}
				retries = append(retries, retryCall{attempt, wait})
			}
			seq := &sequence{errs: tt.errs}

			resp, err := WithRetry(seq, p).Generate(ctx, &Request{})

			if seq.calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", seq.calls, tt.wantCalls)
			}
			if !slices.Equal(clock.sleeps, tt.wantSleep) {
				t.Errorf("sleeps = %v, want %v", clock.sleeps, tt.wantSleep)
			}
			if tt.budget > 0 && clock.slept() > tt.budget {
				t.Errorf("slept %v, past the budget %v", clock.slept(), tt.budget)
			}
			if len(retries) != len(clock.sleeps) {
				t.Errorf("OnRetry called %d times for %d sleeps", len(retries), len(clock.sleeps))
			}
			for i, r := range retries {
				if r.attempt != i+1 || (i < len(clock.sleeps) && r.wait != clock.sleeps[i]) {
					t.Errorf("OnRetry #%d = %+v, want attempt %d wait %v", i, r, i+1, clock.sleeps[i])
				}
			}
			wantFail := len(tt.wantErr) > 0 || len(tt.wantText) > 0 || tt.wantAs != 0
			if !wantFail {
				if err != nil || resp == nil {
					t.Fatalf("Generate = %v, %v; want a response", resp, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Generate succeeded, want an error")
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("errors.Is(%v, %v) = false", err, want)
				}
			}
			for _, want := range tt.wantText {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if tt.wantAs != 0 {
				var api *APIError
				if !errors.As(err, &api) || api.StatusCode != tt.wantAs {
					t.Errorf("error %v does not carry HTTP %d", err, tt.wantAs)
				}
			}
		})
	}
}

func TestWithRetryStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := &fakeClock{now: time.Now()}
	calls := 0
	m := ModelFunc(func(ctx context.Context, req *Request) (*Response, error) {
		calls++
		cancel()
		return nil, &ConnError{URL: "http://model.test", Err: ctx.Err()}
	})
	_, err := WithRetry(m, RetryPolicy{Clock: clock}).Generate(ctx, &Request{})
	if calls != 1 || len(clock.sleeps) != 0 {
		t.Errorf("calls = %d, sleeps = %v; want one call and no sleep", calls, clock.sleeps)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestWithRetrySleepInterrupted(t *testing.T) {
	seq := &sequence{errs: []error{status(503), status(503)}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := RetryPolicy{
		Clock:   clock.NewFake(time.Unix(0, 0)), // never advanced: only ctx ends the wait
		Rand:    func() float64 { return 0 },
		OnRetry: func(int, error, time.Duration) { cancel() },
	}
	_, err := WithRetry(seq, p).Generate(ctx, &Request{})
	var api *APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &api) || api.StatusCode != 503 {
		t.Errorf("err = %v, want it to wrap both the sleep error and HTTP 503", err)
	}
	if seq.calls != 1 {
		t.Errorf("calls = %d, want 1", seq.calls)
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	p := RetryPolicy{BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}
	for _, r := range []float64{0, 0.25, 0.5, 0.999999, 1, -1, 2} {
		p.Rand = func() float64 { return r }
		p = p.withDefaults()
		for n := 1; n <= 12; n++ {
			d := min(p.BaseDelay<<(n-1), p.MaxDelay)
			got := p.backoff(n)
			if got < d/2 || got > d {
				t.Errorf("rand %v attempt %d: wait %v outside [%v, %v]", r, n, got, d/2, d)
			}
		}
	}
	// The defaults and huge attempt numbers neither overflow nor exceed the cap.
	q := RetryPolicy{Rand: func() float64 { return 1 }}.withDefaults()
	if got := q.backoff(1); got != 500*time.Millisecond {
		t.Errorf("default first backoff = %v, want 500ms", got)
	}
	if got := q.backoff(1000); got != 30*time.Second {
		t.Errorf("backoff(1000) = %v, want the 30s cap", got)
	}
	huge := RetryPolicy{BaseDelay: time.Hour, MaxDelay: 1<<63 - 1, Rand: func() float64 { return 1 }}.withDefaults()
	if got := huge.backoff(200); got <= 0 {
		t.Errorf("backoff overflowed to %v", got)
	}
}

func TestDefaultClock(t *testing.T) {
	if c := (RetryPolicy{}).withDefaults().Clock; c != clock.Real {
		t.Errorf("the zero policy waits on %v, want the system clock", c)
	}
}

// The backoff waits on the policy's clock: a fake one holds the retry until
// it is advanced past the wait, however long that wait is.
func TestBackoffWaitsOnTheClock(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	seq := &sequence{errs: []error{status(503)}}
	m := WithRetry(seq, RetryPolicy{Clock: c, BaseDelay: time.Hour, Rand: func() float64 { return 1 }})
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(context.Background(), &Request{})
		done <- err
	}()
	if !c.WaitTimers(1, nil) {
		t.Fatal("no timer")
	}
	c.Advance(59 * time.Minute)
	select {
	case err := <-done:
		t.Fatalf("the wait ended before its hour: %v", err)
	default:
	}
	c.Advance(time.Minute)
	if err := <-done; err != nil || seq.calls != 2 {
		t.Fatalf("after the hour: %v, %d calls; want the second call's success", err, seq.calls)
	}
}

// The deadline check reads the policy's clock: a wait that would end past
// ctx's deadline by the fake clock is refused, though the real clock would
// have left time for it.
func TestRetryBudgetOnTheClock(t *testing.T) {
	now := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(90*time.Minute))
	defer cancel()
	c := clock.NewFake(now.Add(time.Hour)) // 30 minutes left by this clock
	p := RetryPolicy{Clock: c, BaseDelay: 45 * time.Minute, MaxDelay: time.Hour, Rand: func() float64 { return 1 }}
	_, err := WithRetry(&sequence{errs: []error{status(503)}}, p).Generate(ctx, &Request{})
	if !errors.Is(err, ErrNoRetryBudget) {
		t.Errorf("err = %v, want ErrNoRetryBudget", err)
	}
}
