package jetstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
)

// Sentinel errors of leases.
var (
	// ErrHeld: another worker holds a live lease on the rollout.
	ErrHeld = errors.New("jetstream: rollout is held by another worker")
	// ErrFenced: the lease expired or was taken over; its holder may not
	// publish a result.
	ErrFenced = errors.New("jetstream: lease lost (expired or taken over); result not published")
)

// leaseKey is the rollout's key in the lease bucket and the last token of
// its result subject.
func leaseKey(j eval.Job) string {
	h := sha256.Sum256([]byte(j.Key()))
	return j.Eval + "." + hex.EncodeToString(h[:12])
}

func resultSubjectOf(j eval.Job) string { return resultSubject + leaseKey(j) }

// leaseValue is what a lease entry holds (for eval show and debugging).
type leaseValue struct {
	Worker string    `json:"worker"`
	Key    string    `json:"key"`
	RunID  string    `json:"run_id,omitempty"`
	State  string    `json:"state"` // running or done
	At     time.Time `json:"at"`
}

// Lease is a worker's hold on one rollout; Token is the current revision.
type Lease struct {
	c     *Conn
	key   string
	val   leaseValue
	Token uint64
}

// Acquire takes the rollout's lease for worker. ErrHeld if another holds
// it.
func (c *Conn) Acquire(ctx context.Context, j eval.Job, worker string) (*Lease, error) {
	l := &Lease{c: c, key: leaseKey(j), val: leaseValue{Worker: worker, Key: j.Key(), State: "running", At: time.Now().UTC()}}
	raw, _ := json.Marshal(l.val)
	rev, err := c.leases.Create(ctx, l.key, raw)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, ErrHeld
	} else if err != nil {
		return nil, fmt.Errorf("jetstream: lease %s: %w", j.Key(), err)
	}
	l.Token = rev
	return l, nil
}

// Renew extends the lease (a compare-and-set on Token); ErrFenced if it
// was lost.
func (l *Lease) Renew(ctx context.Context, runID string) error {
	l.val.At, l.val.RunID = time.Now().UTC(), runID
	return l.put(ctx)
}

// Commit marks the rollout done under the current token: after it
// succeeds, no other worker can acquire the lease until it expires, and
// this holder may publish the result. ErrFenced if the lease was lost.
func (l *Lease) Commit(ctx context.Context) error {
	l.val.At, l.val.State = time.Now().UTC(), "done"
	return l.put(ctx)
}

// put sets the entry under the current token, trying again (up to 3
// times) while the servers do not answer; a try refused for its token
// after one whose reply was lost counts if the entry holds what was sent
// (that try landed).
func (l *Lease) put(ctx context.Context) error {
	raw, _ := json.Marshal(l.val)
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, min(tryTimeout, l.c.LeaseTTL/3)) // a try again within the TTL
		rev, err := l.c.leases.Update(tctx, l.key, raw, l.Token)
		cancel()
		switch {
		case err == nil:
			l.Token = rev
			return nil
		case isWrongLastSeq(err) || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound):
			if try > 0 {
				if e, gerr := l.c.leases.Get(ctx, l.key); gerr == nil && bytes.Equal(e.Value(), raw) {
					l.Token = e.Revision()
					return nil
				}
			}
			return ErrFenced
		case !isUnavailable(err) || try == 2 || !sleepCtx(ctx, time.Duration(try+1)*250*time.Millisecond):
			return fmt.Errorf("jetstream: lease %s: %w", l.val.Key, err)
		}
	}
}

// tryTimeout bounds one try of a request that is tried again (a lost
// reply would otherwise take the caller's whole deadline).
const tryTimeout = apiTimeout / 2

// sleepCtx waits d unless ctx ends first; it reports whether it waited.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Release gives the lease up at once (a failed attempt to be retried).
func (l *Lease) Release(ctx context.Context) {
	l.c.leases.Delete(ctx, l.key, jetstream.LastRevision(l.Token))
}

// failedAttempt counts a failed attempt of j and returns how many there
// were. Deliveries are not attempts: a rollout handed back (a stopped
// worker, another version, the servers unavailable) spends none. The
// count lives beside the lease (key <lease key>.fail, so it expires with
// the bucket's TTL: a rollout not retried within it starts counting
// again, erring towards more attempts, never fewer).
func (c *Conn) failedAttempt(ctx context.Context, j eval.Job) int {
	key := leaseKey(j) + ".fail"
	for try := 0; try < 5; try++ {
		e, err := c.leases.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := c.leases.Create(ctx, key, []byte("1")); err == nil {
				return 1
			}
			continue
		} else if err != nil {
			return 1 // unknown: count this one alone
		}
		n, _ := strconv.Atoi(string(e.Value()))
		if _, err := c.leases.Update(ctx, key, []byte(strconv.Itoa(n+1)), e.Revision()); err == nil {
			return n + 1
		}
	}
	return 1
}
