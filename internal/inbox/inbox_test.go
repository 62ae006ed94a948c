package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

func mustOpen(t *testing.T, dir string) *Inbox {
	t.Helper()
	in, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	in.poll = 5 * time.Millisecond
	return in
}

func pendingTexts(t *testing.T, in *Inbox) []string {
	t.Helper()
	ms, err := in.Pending()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.ID+":"+m.Text)
	}
	return out
}

func TestTornLastLineIgnoredUntilComplete(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	mustSend(t, dir, "one")
	line := string(encodeLine(command{Op: opSay, ID: "M2", Text: "two", Time: time.Now()}))
	appendRaw(t, dir, InboxFile, line[:len(line)/2])
	if got := pendingTexts(t, in); fmt.Sprint(got) != "[M1:one]" {
		t.Fatalf("with torn tail: %v", got)
	}
	appendRaw(t, dir, InboxFile, line[len(line)/2:])
	if got := pendingTexts(t, in); fmt.Sprint(got) != "[M1:one M2:two]" {
		t.Fatalf("after completion: %v", got)
	}
	// A complete garbage line is skipped, not fatal, and not a message.
	appendRaw(t, dir, InboxFile, "not json\n")
	mustSend(t, dir, "three")
	if got := pendingTexts(t, in); fmt.Sprint(got) != "[M1:one M2:two M3:three]" {
		t.Fatalf("after garbage: %v", got)
	}
}

// TestFloodDeliveredOnceInOrder sends 1,000 messages while the run delivers
// in cycles, restarting (re-Open) twice, and checks each message entered the
// "history" exactly once, in id order.
func TestFloodDeliveredOnceInOrder(t *testing.T) {
	dir := t.TempDir()
	const n = 1000
	var history []string
	var seq int64
	record := func(m Message) (int64, error) {
		history = append(history, m.ID)
		seq++
		return seq, nil
	}
	in := mustOpen(t, dir)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			if _, err := Send(dir, "flood", "msg "+strconv.Itoa(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ctx := context.Background()
	cycles := 0
	restarts := 0
	for done := false; !done; cycles++ {
		select {
		case <-sent:
			done = true
		default:
		}
		// Like a run between steps: wait for news, at most a little while.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		in.Wait(wctx)
		cancel()
		if cycles%25 == 10 {
			in = mustOpen(t, dir) // simulated restart
			restarts++
		}
		if _, err := in.Deliver(ctx, record); err != nil {
			t.Fatal(err)
		}
		// The unlocked pair must agree: nothing Pending was already delivered.
		ps, err := in.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if n, _ := idNumber(p.ID, 'M'); n <= len(history) {
				t.Fatalf("pending %s was already delivered", p.ID)
			}
		}
	}
	in = mustOpen(t, dir)
	if _, err := in.Deliver(ctx, record); err != nil {
		t.Fatal(err)
	}
	if restarts == 0 {
		t.Log("sender finished before the first restart; only the final re-Open was exercised")
	}
	if len(history) != n {
		t.Fatalf("delivered %d messages, want %d", len(history), n)
	}
	for i, id := range history {
		if id != "M"+strconv.Itoa(i+1) {
			t.Fatalf("history[%d] = %s: out of order or duplicated", i, id)
		}
	}
	msgs, _ := List(dir)
	for i, m := range msgs {
		if m.State != StateDelivered || m.Seq != int64(i+1) {
			t.Fatalf("%s: state %s seq %d", m.ID, m.State, m.Seq)
		}
	}
}

func TestDeliverSkipsWithdrawnAndUsesLatestText(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	a, b := mustSend(t, dir, "draft"), mustSend(t, dir, "oops")
	Update(dir, a, "final")
	Withdraw(dir, b)
	var seen []string
	got, err := in.Deliver(context.Background(), func(m Message) (int64, error) {
		seen = append(seen, m.Text)
		return 9, nil
	})
	if err != nil || fmt.Sprint(seen) != "[final]" || len(got) != 1 || got[0].Seq != 9 || got[0].State != StateDelivered {
		t.Fatalf("deliver: %v %v %+v", err, seen, got)
	}
}

func TestDeliverStopsOnRecordError(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	mustSend(t, dir, "a")
	mustSend(t, dir, "b")
	boom := errors.New("disk full")
	got, err := in.Deliver(context.Background(), func(m Message) (int64, error) {
		if m.ID == "M2" {
			return 0, boom
		}
		return 1, nil
	})
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Fatalf("got %v, %v", got, err)
	}
	if p := pendingTexts(t, in); fmt.Sprint(p) != "[M2:b]" {
		t.Fatalf("pending after failure: %v", p)
	}
}

func TestMarkDeliveredIdempotentAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	id := mustSend(t, dir, "x")
	// Crash between the record event and the mark: resume reconciles.
	in = mustOpen(t, dir)
	for _, seq := range []int64{12, 12, 99} {
		if err := in.MarkDelivered(id, seq); err != nil {
			t.Fatal(err)
		}
	}
	if p := pendingTexts(t, in); len(p) != 0 {
		t.Fatalf("pending after mark: %v", p)
	}
	msgs, _ := List(dir)
	if msgs[0].Seq != 12 {
		t.Fatalf("seq %d, want the first mark 12", msgs[0].Seq)
	}
}

func TestControlsOnceAndAfterRestart(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	Control(dir, ControlPause, nil)
	Control(dir, ControlBudget, map[string]string{"turns": "60"})
	cs, err := in.Controls()
	if err != nil || len(cs) != 2 || cs[0].Kind != ControlPause || cs[1].Args["turns"] != "60" || cs[1].ID != "C2" {
		t.Fatalf("controls: %+v %v", cs, err)
	}
	if cs, _ := in.Controls(); len(cs) != 0 {
		t.Fatalf("controls returned twice: %+v", cs)
	}
	if err := in.MarkApplied("C1", 3); err != nil {
		t.Fatal(err)
	}
	Control(dir, ControlResume, nil)
	in = mustOpen(t, dir) // restart: C2 was never marked applied
	cs, _ = in.Controls()
	if len(cs) != 2 || cs[0].ID != "C2" || cs[1].Kind != ControlResume {
		t.Fatalf("after restart: %+v", cs)
	}
}

func TestWaitWakesOnSend(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	mustSend(t, dir, "before")
	// A message sent before Wait but after the last read wakes at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.Wait(ctx); err != nil {
		t.Fatalf("wait with unread message: %v", err)
	}
	in.Pending()
	short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelShort()
	if err := in.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing new: %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(20 * time.Millisecond)
		mustSend(t, dir, "wake up")
	})
	if err := in.Wait(ctx); err != nil {
		t.Fatalf("wait: %v", err)
	}
	wg.Wait()
	if p := pendingTexts(t, in); fmt.Sprint(p) != "[M1:before M2:wake up]" {
		t.Fatalf("pending after wake: %v", p)
	}
}

func TestNotify(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	ch := in.Notify(ctx)
	for i := range 3 {
		mustSend(t, dir, "n"+strconv.Itoa(i))
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
		}
		in.Pending()
	}
	cancel()
	for range ch { // closed once ctx ends
	}
}

// TestDeliverHoldsTheLock: a withdraw racing with delivery waits for the
// delivery to be recorded and is then refused, never silently lost.
func TestDeliverHoldsTheLock(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	id := mustSend(t, dir, "x")
	res := make(chan error, 1)
	_, err := in.Deliver(context.Background(), func(m Message) (int64, error) {
		go func() { res <- Withdraw(dir, id) }()
		time.Sleep(50 * time.Millisecond) // give the withdraw every chance to cut in
		return 7, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var late *TooLateError
	if err := <-res; !errors.As(err, &late) || late.Seq != 7 {
		t.Fatalf("withdraw racing delivery: %v, want TooLateError at seq 7", err)
	}
}

// TestIdleDeliverThenSend: a Deliver that finds nothing (and so skips the
// lock and, on an unchanged file, the read) does not lose what is sent
// after it, updates included, nor deliver anything twice.
func TestIdleDeliverThenSend(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	deliver := func() []string {
		t.Helper()
		var seen []string
		if _, err := in.Deliver(context.Background(), func(m Message) (int64, error) {
			seen = append(seen, m.Text)
			return int64(len(seen)), nil
		}); err != nil {
			t.Fatal(err)
		}
		return seen
	}
	if got := deliver(); len(got) != 0 {
		t.Fatalf("empty inbox delivered %v", got)
	}
	if got := deliver(); len(got) != 0 {
		t.Fatalf("empty inbox delivered %v", got)
	}
	a := mustSend(t, dir, "first")
	if err := Update(dir, a, "first, edited"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(deliver()); got != "[first, edited]" {
		t.Fatalf("after send and update: %s", got)
	}
	if got := deliver(); len(got) != 0 {
		t.Fatalf("delivered again: %v", got)
	}
	mustSend(t, dir, "second")
	if got := fmt.Sprint(deliver()); got != "[second]" {
		t.Fatalf("after a second send: %s", got)
	}
}
