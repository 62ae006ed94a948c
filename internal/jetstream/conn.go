package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of what Setup creates (see the package doc).
const (
	RolloutStream = "APODEX_ROLLOUTS"
	ResultStream  = "APODEX_RESULTS"
	WorkConsumer  = "workers"
	LeaseBucket   = "apodex-leases"
	WorldStore    = "apodex-worlds"
	RecordStore   = "apodex-records"
	EvalBucket    = "apodex-evals"

	rolloutSubject = "apodex.rollout."
	resultSubject  = "apodex.result."

	// DefaultLeaseTTL is how long a rollout stays held after its worker's
	// last renewal.
	DefaultLeaseTTL = 30 * time.Second
)

// Conn is a connection with everything Setup created.
type Conn struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	URL      string
	LeaseTTL time.Duration
	// Log gets what collecting recovers from (a reading of the results
	// cut and resumed); nil: nothing is logged.
	Log      *slog.Logger
	Replicas int
	rollouts jetstream.Stream
	results  jetstream.Stream
	leases   jetstream.KeyValue
	worlds   jetstream.ObjectStore
	records  jetstream.ObjectStore
	evals    jetstream.KeyValue
	fetchMu  sync.Mutex
}

// Connect dials url (one URL or several, comma-separated) and creates the
// streams, consumer, bucket and object stores if missing. leaseTTL 0 is
// the queue's TTL (DefaultLeaseTTL for a new queue); another TTL than the
// queue's is refused (ErrLeaseTTL) while the queue has live workers, and
// otherwise becomes the queue's. An unreachable URL fails at once, naming
// the URL.
func Connect(ctx context.Context, url, name string, leaseTTL time.Duration) (*Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		// A frozen or cut-off server is left for another within ~20 s
		// (the default waits two pings of two minutes).
		nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(3))
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect to %s: %w; is a nats-server with JetStream running there? (--nats embedded starts one in this process)", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	// The lease TTL is the queue's (the work consumer's ack wait and the
	// lease bucket's TTL): all its workers renew by it.
	queueTTL := time.Duration(0)
	if cons, err := js.Consumer(ctx, RolloutStream, WorkConsumer); err == nil {
		queueTTL = cons.CachedInfo().Config.AckWait
	}
	switch {
	case leaseTTL <= 0 && queueTTL > 0:
		leaseTTL = queueTTL
	case leaseTTL <= 0:
		leaseTTL = DefaultLeaseTTL
	case queueTTL > 0 && leaseTTL != queueTTL:
		if live := liveWorkers(ctx, js); len(live) > 0 {
			nc.Close()
			return nil, fmt.Errorf("jetstream: the queue on %s holds rollouts with a lease TTL of %s, which its live workers (%s) renew by; %s is refused: every worker of a queue uses the same TTL. Omit --lease-ttl to use the queue's, or stop those workers first to change it: %w",
				url, queueTTL, strings.Join(live, ", "), leaseTTL, ErrLeaseTTL)
		}
	}
	c := &Conn{nc: nc, js: js, URL: url, LeaseTTL: leaseTTL, Replicas: min(3, max(1, len(nc.Servers())))}
	// Two processes setting up at once can race (one creates what the
	// other meant to): setup is idempotent, so it is tried again.
	for try := 0; try < 5; try++ {
		if err = c.setup(ctx); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: set up on %s: %w", url, err)
	}
	return c, nil
}

func (c *Conn) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// ErrLeaseTTL: a lease TTL other than the queue's while workers use it.
var ErrLeaseTTL = errors.New("lease TTL differs from the queue's")

// liveWorkers names the workers with a heartbeat in the worker bucket
// (none if it cannot be read).
func liveWorkers(ctx context.Context, js jetstream.JetStream) []string {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, WorkerBucket)
	if err != nil {
		return nil
	}
	keys, _ := kv.Keys(ctx)
	return keys
}

// Close drains nothing: it drops the connection (what a dead process does).
func (c *Conn) Close() { c.nc.Close() }

func (c *Conn) setup(ctx context.Context) error {
	var err error
	c.rollouts, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: RolloutStream, Subjects: []string{rolloutSubject + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: c.Replicas, Duplicates: time.Hour,
		Description: "apodex rollouts waiting for a worker (one per eval.Job, id = eval/key)"})
	if err != nil {
		return err
	}
	_, err = c.js.CreateOrUpdateConsumer(ctx, RolloutStream, jetstream.ConsumerConfig{Durable: WorkConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: c.LeaseTTL, MaxDeliver: -1, MaxAckPending: 100000, Replicas: c.Replicas})
	if err != nil {
		return err
	}
	c.results, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ResultStream, Subjects: []string{resultSubject + ">", abandonedSubject + ">"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: c.Replicas,
		Description: "apodex rollout results (at most one per subject) and abandoned runs"})
	if err != nil {
		return err
	}
	c.leases, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, History: 1, TTL: c.LeaseTTL,
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Description: "apodex rollout leases; revision = fencing token"})
	if err != nil {
		return err
	}
	c.worlds, err = c.objectStore(ctx, jetstream.ObjectStoreConfig{Bucket: WorldStore, Storage: jetstream.FileStorage,
		Replicas: c.Replicas, Description: "apodex world bundles by world id"})
	if err != nil {
		return err
	}
	c.records, err = c.objectStore(ctx, jetstream.ObjectStoreConfig{Bucket: RecordStore, Storage: jetstream.FileStorage,
		Replicas: c.Replicas, Description: "apodex run records by run id"})
	if err != nil {
		return err
	}
	c.evals, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: EvalBucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Description: "apodex eval plans by eval id"})
	return err
}

// objectStore opens the object store cfg names, creating it if missing;
// an existing one keeps its settings (an operator's size limit).
func (c *Conn) objectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if s, err := c.js.ObjectStore(ctx, cfg.Bucket); err == nil {
		return s, nil
	}
	return c.js.CreateOrUpdateObjectStore(ctx, cfg)
}

// isWrongLastSeq: the server refused a publish for its expected sequence
// (a replicated stream answers with the "constant" code).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// isUnavailable reports whether err says the servers could not answer
// now (no leader yet, a node lost, a timeout) rather than that the request
// was wrong: worth trying again later.
func isUnavailable(err error) bool {
	if err == nil || IsFull(err) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// Error codes of a store that cannot take more (nats-server's
// jetstream_errors.json): the account's or the server's limits, or a
// stream's own (store failed: maximum bytes or messages exceeded).
const (
	errAccountResources = 10002
	errInsufficient     = 10023
	errMemoryResources  = 10028
	errStorageResources = 10047
	errStoreFailed      = 10077
)

// IsFull reports whether err says a stream or object store is full.
func IsFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errAccountResources, errInsufficient, errMemoryResources, errStorageResources:
		return true
	case errStoreFailed:
		return strings.Contains(apiErr.Description, "maximum bytes") || strings.Contains(apiErr.Description, "maximum messages")
	}
	return false
}
