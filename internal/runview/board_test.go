package runview

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

func writeRecord(t *testing.T, add func(l *record.Log)) string {
	t.Helper()
	dir := t.TempDir()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := record.Create(dir, func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil {
		t.Fatal(err)
	}
	add(l)
	l.Close()
	return dir
}

func TestBoardWatcherReadsTheBoard(t *testing.T) {
	dir := writeRecord(t, func(l *record.Log) {
		l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
		l.Append(record.TypeBoard, "lead", record.Board{Op: "add", ID: "T1", Title: new("count rows"), Objective: new("o")})
	})
	w := BoardWatcher{Dir: dir}
	v, err := w.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Items) != 1 || v.Seq != 2 || v.Finished || v.Assignments == nil {
		t.Fatalf("view %+v", v)
	}
	head, body := v.Text()
	if !strings.Contains(head, "board at event 2") || !strings.Contains(body, "T1") {
		t.Errorf("text:\n%s%s", head, body)
	}
}

func TestBoardWatcherFollowEndsOnReactRun(t *testing.T) {
	dir := writeRecord(t, func(l *record.Log) {
		l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	w := BoardWatcher{Dir: dir}
	if err := w.Follow(ctx, &b, false); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil || b.String() != noBoard+"\n" {
		t.Errorf("Follow printed %q (ctx %v); want the no-board note once", b.String(), ctx.Err())
	}
}
