package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WorkerBucket holds one entry per live worker (key: its name), put every
// heartbeatEvery; an entry not renewed for workerTTL disappears.
const (
	WorkerBucket   = "apodex-workers"
	heartbeatEvery = 5 * time.Second
	workerTTL      = time.Minute
)

// WorkerInfo is a worker's heartbeat.
type WorkerInfo struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	Running   int64     `json:"running"`
	Done      int64     `json:"done"`
	Heartbeat time.Time `json:"heartbeat"`
}

// InFlight is a rollout of an eval held by a worker.
type InFlight struct {
	Eval    string    `json:"eval"`
	Rollout string    `json:"rollout"`
	Worker  string    `json:"worker"`
	RunID   string    `json:"run_id,omitempty"`
	Since   time.Time `json:"renewed"`
}

// Status is what `eval show` lists of a queued eval.
type Status struct {
	Workers  []WorkerInfo `json:"workers"`
	InFlight []InFlight   `json:"in_flight"`
}

func (c *Conn) workersKV(ctx context.Context) (jetstream.KeyValue, error) {
	return c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: WorkerBucket, History: 1, TTL: workerTTL,
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Description: "apodex worker heartbeats"})
}

// heartbeat puts w's entry now and every heartbeatEvery until ctx ends.
func (w *Worker) heartbeat(ctx context.Context, running, done *atomic.Int64) {
	kv, err := w.Conn.workersKV(ctx)
	if err != nil {
		w.logger().Warn("heartbeat bucket", "err", err)
		return
	}
	host, _ := os.Hostname()
	key := kvKey(w.Name)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		raw, _ := json.Marshal(WorkerInfo{Name: w.Name, Host: host, Running: running.Load(), Done: done.Load(), Heartbeat: time.Now().UTC()})
		kv.Put(ctx, key, raw)
		select {
		case <-ctx.Done():
			kv.Delete(context.Background(), key)
			return
		case <-t.C:
		}
	}
}

// kvKey maps a name to the characters a KV key allows.
func kvKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			return r
		}
		return '_'
	}, s)
}

// Status lists the live workers and eval's rollouts in flight (every
// eval's with eval "").
func (c *Conn) Status(ctx context.Context, eval string) (Status, error) {
	var st Status
	// Listing keys reads a bucket through an R1 consumer, which a cluster
	// can place on a node that has just died: never wait for it unbounded.
	ctx, cancel := context.WithTimeout(ctx, 3*apiTimeout)
	defer cancel()
	kv, err := c.workersKV(ctx)
	if err != nil {
		return st, fmt.Errorf("jetstream: status: %w", err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return st, fmt.Errorf("jetstream: status: %w", err)
	}
	for _, k := range keys {
		if e, err := kv.Get(ctx, k); err == nil {
			var wi WorkerInfo
			if json.Unmarshal(e.Value(), &wi) == nil {
				st.Workers = append(st.Workers, wi)
			}
		}
	}
	lkeys, err := c.leases.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return st, fmt.Errorf("jetstream: status: %w", err)
	}
	for _, k := range lkeys {
		ev, _, _ := strings.Cut(k, ".")
		if eval != "" && ev != eval {
			continue
		}
		if e, err := c.leases.Get(ctx, k); err == nil {
			var v leaseValue
			if json.Unmarshal(e.Value(), &v) == nil && v.State == "running" {
				st.InFlight = append(st.InFlight, InFlight{Eval: ev, Rollout: v.Key, Worker: v.Worker, RunID: v.RunID, Since: v.At})
			}
		}
	}
	sort.Slice(st.Workers, func(i, j int) bool { return st.Workers[i].Name < st.Workers[j].Name })
	sort.Slice(st.InFlight, func(i, j int) bool {
		a, b := st.InFlight[i], st.InFlight[j]
		return a.Eval < b.Eval || a.Eval == b.Eval && a.Rollout < b.Rollout
	})
	return st, nil
}

// Scores is how many of eval's rollouts have a result on the queue (each
// has at most one), whether or not a host has collected them.
func (c *Conn) Scores(ctx context.Context, eval string) (uint64, error) {
	info, err := c.results.Info(ctx, jetstream.WithSubjectFilter(resultSubject+eval+".>"))
	if err != nil {
		return 0, fmt.Errorf("jetstream: count results: %w", err)
	}
	n := uint64(0)
	for _, k := range info.State.Subjects {
		n += k
	}
	return n, nil
}
