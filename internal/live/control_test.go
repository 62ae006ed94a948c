package live_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
)

// The runtime answers a progress query while Deliver holds the inbox lock
// (so no sender can change the message meanwhile); the answer must not take
// that lock again, or the run deadlocks and every `apodex say`, `messages`,
// `status` and `cancel` of other processes hangs on the lock with it.
func TestProgressAnswerUnderTheInboxLock(t *testing.T) {
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	if _, err := log.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r1", Objective: "count the files"}); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"How is it going?", "Use the 2023 figures."} {
		if _, err := inbox.Send(dir, "u", text); err != nil {
			t.Fatal(err)
		}
	}
	c := live.New(live.Config{Inbox: in, Log: log, Cancel: func(error) {}, Contract: &contract.Contract{Objective: "count the files"},
		Status: func() string { return runview.StatusText(dir) }})

	got := make(chan []llm.Message, 1)
	go func() { got <- c.BeforeCall("main")(context.Background()) }()
	var msgs []llm.Message
	select {
	case msgs = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("delivering a progress query did not return within 5 s: the answer takes the inbox lock Deliver holds")
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "[user message M2 · ") {
		t.Errorf("history gets %+v, want only M2 (the query is answered by the runtime)", msgs)
	}
	c2, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var answered bool
	for _, e := range c2.Events {
		var m struct{ ID, Answer string }
		if e.Type == record.TypeMessage && e.Decode(&m) == nil && m.ID == "M1" {
			answered = strings.HasPrefix(m.Answer, "run "+filepath.Base(dir)+": ") && strings.Contains(m.Answer, "turns 0")
		}
	}
	if !answered {
		t.Errorf("no recorded answer to M1 from the board and the record")
	}
	ms, err := inbox.List(dir) // the lock is free again
	if err != nil || len(ms) != 2 || ms[0].State != inbox.StateDelivered || ms[1].State != inbox.StateDelivered {
		t.Errorf("messages after delivery: %+v %v", ms, err)
	}
}
