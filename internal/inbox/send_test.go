package inbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The test binary doubles as a sender process: with helperDir set it sends
// helperN messages to that run directory, prints each id and exits.
const (
	helperDir    = "APODEX_INBOX_TEST_DIR"
	helperSender = "APODEX_INBOX_TEST_SENDER"
	helperN      = "APODEX_INBOX_TEST_N"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDir); dir != "" {
		os.Exit(runHelper(dir))
	}
	os.Exit(m.Run())
}

func runHelper(dir string) int {
	n, _ := strconv.Atoi(os.Getenv(helperN))
	sender := os.Getenv(helperSender)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := range n {
		id, err := Send(dir, sender, fmt.Sprintf("%s %d", sender, i))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(w, id)
	}
	return 0
}

// checkConcurrent verifies that every sender's messages are all kept, in
// each sender's order, with unique gapless ids, and that no line is torn.
func checkConcurrent(t *testing.T, dir string, senders []string, n int, ids map[string][]string) {
	t.Helper()
	msgs, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(senders)*n {
		t.Fatalf("got %d messages, want %d", len(msgs), len(senders)*n)
	}
	next := map[string]int{}
	for i, m := range msgs {
		if want := "M" + strconv.Itoa(i+1); m.ID != want {
			t.Fatalf("message %d has id %s, want %s", i, m.ID, want)
		}
		if want := fmt.Sprintf("%s %d", m.Sender, next[m.Sender]); m.Text != want {
			t.Fatalf("%s: text %q, want %q (lost or reordered)", m.ID, m.Text, want)
		}
		if got := ids[m.Sender][next[m.Sender]]; got != m.ID {
			t.Fatalf("sender %s was told %s for %q, file says %s", m.Sender, got, m.Text, m.ID)
		}
		next[m.Sender]++
	}
	data, err := os.ReadFile(filepath.Join(dir, InboxFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for i, l := range lines {
		if _, err := parseLine(l); err != nil {
			t.Fatalf("line %d torn or interleaved: %v: %q", i+1, err, l)
		}
	}
	if len(lines) != len(senders)*n {
		t.Fatalf("%d lines, want %d", len(lines), len(senders)*n)
	}
}

func TestConcurrentSendersGoroutines(t *testing.T) {
	dir := t.TempDir()
	const n = 500
	senders := []string{"alice", "bob"}
	ids := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Go(func() {
			var got []string
			for i := range n {
				id, err := Send(dir, s, fmt.Sprintf("%s %d", s, i))
				if err != nil {
					t.Error(err)
					return
				}
				got = append(got, id)
			}
			mu.Lock()
			ids[s] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	checkConcurrent(t, dir, senders, n, ids)
}

func TestConcurrentSendersProcesses(t *testing.T) {
	dir := t.TempDir()
	const n = 500
	senders := []string{"proc1", "proc2"}
	cmds := map[string]*exec.Cmd{}
	outs := map[string]*bytes.Buffer{}
	for _, s := range senders {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperDir+"="+dir, helperSender+"="+s, helperN+"="+strconv.Itoa(n))
		outs[s] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[s], os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[s] = cmd
	}
	ids := map[string][]string{}
	for _, s := range senders {
		if err := cmds[s].Wait(); err != nil {
			t.Fatalf("sender %s: %v", s, err)
		}
		ids[s] = strings.Fields(outs[s].String())
	}
	checkConcurrent(t, dir, senders, n, ids)
}

func TestUpdateWithdrawBeforeDelivery(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	a := mustSend(t, dir, "look at the 2020 data")
	b := mustSend(t, dir, "ignore the appendix")
	c := mustSend(t, dir, "use only peer-reviewed sources")
	if err := Update(dir, a, "look at the 2021 data"); err != nil {
		t.Fatal(err)
	}
	if err := Update(dir, a, "look at the 2022 data"); err != nil {
		t.Fatal(err)
	}
	if err := Withdraw(dir, b); err != nil {
		t.Fatal(err)
	}
	if err := Withdraw(dir, b); !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("second withdraw: %v, want ErrWithdrawn", err)
	}
	if err := Update(dir, b, "x"); !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("update after withdraw: %v, want ErrWithdrawn", err)
	}
	for _, id := range []string{"M9", "m1", "", "M01", "C1"} {
		if err := Update(dir, id, "x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("update %q: %v, want ErrNotFound", id, err)
		}
		if err := Withdraw(dir, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("withdraw %q: %v, want ErrNotFound", id, err)
		}
	}
	got := pendingTexts(t, in)
	want := []string{a + ":look at the 2022 data", c + ":use only peer-reviewed sources"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
	msgs, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := msgs[0]; m.State != StateUpdated || m.Updates != 2 || m.Original != "look at the 2020 data" {
		t.Errorf("updated message: %+v", m)
	}
	if msgs[1].State != StateWithdrawn || msgs[2].State != StateQueued {
		t.Errorf("states %s %s, want withdrawn queued", msgs[1].State, msgs[2].State)
	}
	if msgs[2].Class != ClassSourceToolConstraint {
		t.Errorf("class %s, want %s", msgs[2].Class, ClassSourceToolConstraint)
	}
}

func TestTooLateAfterDelivery(t *testing.T) {
	dir := t.TempDir()
	in := mustOpen(t, dir)
	id := mustSend(t, dir, "also cover 2023")
	if err := in.MarkDelivered(id, 57); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"update":   func() error { return Update(dir, id, "also cover 2024") },
		"withdraw": func() error { return Withdraw(dir, id) },
	} {
		err := op()
		var late *TooLateError
		if !errors.As(err, &late) || late.ID != id || late.Seq != 57 || late.Time.IsZero() {
			t.Fatalf("%s after delivery: %v, want TooLateError{%s, 57, time}", name, err, id)
		}
		if !strings.Contains(err.Error(), "seq 57") {
			t.Errorf("%s: message %q does not say when", name, err)
		}
	}
	msgs, _ := List(dir)
	if m := msgs[0]; m.State != StateDelivered || m.Seq != 57 || m.Text != "also cover 2023" {
		t.Fatalf("after refused changes: %+v", m)
	}
}

func TestSendErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Send(filepath.Join(dir, "nope"), "u", "hi"); !errors.Is(err, ErrNoRun) {
		t.Errorf("missing run: %v, want ErrNoRun", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Send created the missing run directory")
	}
	if _, err := Send(dir, "u", " \n"); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
	if _, err := Send(dir, "u", strings.Repeat("x", MaxText+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("large: %v", err)
	}
	if err := Control(dir, "explode", nil); !errors.Is(err, ErrBadControl) {
		t.Errorf("bad control: %v", err)
	}
	if err := Control(dir, ControlBudget, nil); err == nil {
		t.Errorf("budget without args accepted")
	}
}

func TestSenderRepairsTornTail(t *testing.T) {
	dir := t.TempDir()
	mustSend(t, dir, "first")
	// A sender killed mid-write left half a line and no newline.
	appendRaw(t, dir, InboxFile, `{"op":"say","id":"M2","text":"half`)
	id := mustSend(t, dir, "second")
	if id != "M2" {
		t.Fatalf("id %s after torn tail, want M2 (the torn say never counted)", id)
	}
	msgs, _ := List(dir)
	if len(msgs) != 2 || msgs[1].Text != "second" {
		t.Fatalf("messages after repair: %+v", msgs)
	}
}

func mustSend(t *testing.T, dir, text string) string {
	t.Helper()
	id, err := Send(dir, "user", text)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func appendRaw(t *testing.T, dir, name, s string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
