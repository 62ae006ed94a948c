package jetstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
)

// AbandonedFile is the eval directory's list of rollout runs that were
// started and not counted, one JSON line (an Abandoned) each.
const AbandonedFile = "abandoned.jsonl"

// abandonedSubject + "<eval>.<rollout hash>" carries an Abandoned; on
// APODEX_RESULTS, so it survives what a result survives.
const abandonedSubject = "apodex.abandoned."

// Abandoned is a rollout run that will never count: its worker lost the
// lease (stalled, cut off), was stopped and handed the rollout back,
// found it scored already, or died. The run is kept for inspection: in
// its worker's home (marked by a file ABANDONED) and, when it could be
// shipped, in the record store, from which the eval's host fetches it.
type Abandoned struct {
	World   string    `json:"world"`
	Config  string    `json:"config"`
	Rollout int       `json:"rollout"`
	RunID   string    `json:"run_id"`
	Worker  string    `json:"worker"`
	Reason  string    `json:"reason"`
	Shipped bool      `json:"record_shipped"`
	At      time.Time `json:"at"`
}

// abandon keeps run runID of job j as abandoned: marked in this worker's
// home, its record shipped, and a note published for the eval's host. It
// is bounded in time and best effort (what fails is logged): the rollout
// itself is in the queue's hands already.
func (w *Worker) abandon(j eval.Job, runID, reason string) {
	if !validRunID(runID) {
		return
	}
	dir := filepath.Join(w.Options.Home, "runs", runID)
	os.WriteFile(filepath.Join(dir, "ABANDONED"), []byte("this rollout run was not counted: "+reason+"\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*apiTimeout)
	defer cancel()
	a := Abandoned{World: j.World.ID, Config: j.Config.Name, Rollout: j.Rollout, RunID: runID, Worker: w.Name, Reason: reason, At: time.Now().UTC()}
	if err := putDir(ctx, w.Conn.records, runID, dir, "world"); err != nil {
		a.Reason += fmt.Sprintf("; its record was not shipped (%v): it stays on worker %s's home", err, w.Name)
	} else {
		a.Shipped = true
	}
	raw, _ := json.Marshal(a)
	if _, err := w.Conn.js.Publish(ctx, abandonedSubject+leaseKey(j), raw, jetstream.WithMsgID("abandoned/"+runID)); err != nil {
		w.logger().Warn("abandoned run not reported", "run", runID, "err", err)
		return
	}
	if w.crash != nil {
		w.crash.end(runID)
	}
}

// abandonedLog appends the eval's abandoned runs to abandoned.jsonl, once
// each.
type abandonedLog struct {
	path string
	have map[string]bool
}

func openAbandoned(evalDir string) *abandonedLog {
	l := &abandonedLog{path: filepath.Join(evalDir, AbandonedFile), have: map[string]bool{}}
	for _, a := range readAbandoned(l.path) {
		l.have[a.RunID] = true
	}
	return l
}

func (l *abandonedLog) add(a Abandoned) error {
	if l.have[a.RunID] {
		return nil
	}
	raw, _ := json.Marshal(a)
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(raw, '\n')); err != nil {
		return err
	}
	l.have[a.RunID] = true
	return f.Sync()
}

// ReadAbandoned lists eval id's abandoned runs known on home.
func ReadAbandoned(home, id string) []Abandoned {
	return readAbandoned(filepath.Join(eval.Dir(home, id), AbandonedFile))
}

func readAbandoned(path string) []Abandoned {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Abandoned
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a Abandoned
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.RunID != "" {
			out = append(out, a)
		}
	}
	return out
}

func isAbandonedSubject(s string) bool { return strings.HasPrefix(s, abandonedSubject) }
