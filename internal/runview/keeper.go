package runview

import (
	"context"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/runstate"
)

// keepEvery is how often a Keeper looks for new events.
const keepEvery = 250 * time.Millisecond

// Keeper is a live run's own projection: it folds the events its process
// appends (reading each once, from where it stopped), and keeps the run's
// summary and checkpoint next to the record: at the start of a segment,
// every runstate.CheckpointEvery events (an eighth of the run so far, when
// that is more), and at the end. The run reads its
// totals and trainability from it instead of reading its record again.
type Keeper struct {
	dir string

	mu   sync.Mutex
	st   *runstate.Loaded
	kept int64 // seq of the last checkpoint written
}

// Keep folds the record of the run in dir (from its checkpoint) and writes
// its summary and checkpoint: the start of a segment.
func Keep(dir string) (*Keeper, error) {
	st, _, err := runstate.LoadFrom(dir)
	if err != nil {
		return nil, err
	}
	k := &Keeper{dir: dir, st: st}
	k.write()
	return k, nil
}

// Run refreshes the projection until ctx ends, writing the summary and the
// checkpoint every runstate.CheckpointEvery events.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		// Every CheckpointEvery events, or an eighth of the run so far when
		// that is more: a checkpoint costs the size of the state, so the
		// writes of a long run cost a bounded multiple of its last one.
		if k.st.Refresh() == nil && k.st.Seq-k.kept >= max(runstate.CheckpointEvery, k.kept/8) {
			k.write()
		}
		k.mu.Unlock()
	}
}

// State folds the events appended since the last look and returns the
// projection; it stays the Keeper's (read it before the next call).
func (k *Keeper) State() (*runstate.Loaded, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.st.Refresh()
	return k.st, err
}

// Close folds what is left and writes the summary and the checkpoint:
// the end of a segment. It returns the final projection.
func (k *Keeper) Close() (*runstate.Loaded, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.st.Refresh()
	if err == nil {
		k.write()
	}
	return k.st, err
}

// write writes the summary and the checkpoint; failures leave them stale,
// which readers repair from the record.
func (k *Keeper) write() {
	b, ok, _ := k.st.Boundary()
	if !ok {
		return
	}
	size := b.End
	if k.st.TornTail {
		size = fileSize(k.dir)
	}
	if k.st.WriteCheckpoint() == nil {
		k.kept = k.st.Seq
	}
	writeSummary(k.dir, k.st, size)
}
