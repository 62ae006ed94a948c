package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
)

func TestFakeFiresInDeadlineOrderOnlyWhenAdvanced(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	fired := make(chan string, 3)
	late := c.NewTimer(3 * time.Second)
	c.AfterFunc(time.Second, func() { fired <- "early" })
	stopped := c.NewTimer(2 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a waiting timer reports true once")
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-late.C():
		t.Fatal("fired before its deadline")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-fired; got != "early" {
		t.Fatalf("fired %q", got)
	}
	c.Advance(2 * time.Second)
	if at := <-late.C(); !at.Equal(time.Unix(3, 0)) {
		t.Errorf("fired at %v", at)
	}
	if c.Timers() != 0 {
		t.Errorf("%d timers left", c.Timers())
	}
}

func TestSleepOnTheFakeClock(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), c, time.Minute) }()
	c.WaitTimers(1, nil)
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, c, time.Hour); err == nil {
		t.Error("a cancelled sleep returned nil")
	}
}
