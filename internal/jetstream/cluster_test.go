package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// cluster starts three JetStream servers routed to each other on
// loopback and returns them with a client URL listing all three.
//
// The route ports are picked free and then given to the servers, so
// another test process may take one in between (CI runs packages in
// parallel on many cores: a node once never became ready). A cluster
// whose nodes do not all come up is shut down and formed again on new
// ports; client ports are left to the servers.
func cluster(t *testing.T) ([]*server.Server, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		nodes, url, err := tryCluster(t)
		if err == nil {
			return nodes, url
		}
		if attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; again on new ports", attempt, err)
	}
}

func tryCluster(t *testing.T) ([]*server.Server, string, error) {
	var cports []int
	var routes []string
	for range 3 {
		cports = append(cports, freePort(t))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cports[len(cports)-1]))
	}
	var out []*server.Server
	var urls []string
	shutdown := func() {
		for _, s := range out {
			s.Shutdown()
		}
	}
	for i := range 3 {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
			NoSigs: true, NoLog: true, Cluster: server.ClusterOpts{Name: "apodex-test", Host: "127.0.0.1", Port: cports[i]},
			Routes: server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(opts)
		if err != nil {
			shutdown()
			return nil, "", err
		}
		if os.Getenv("APODEX_TEST_NATS_LOG") != "" { // the servers' own log, for a failure to read
			opts.NoLog = false
			s.SetLoggerV2(testLogger{t, opts.ServerName}, false, false, false)
		}
		s.Start()
		out = append(out, s)
	}
	for _, s := range out {
		if !s.ReadyForConnections(10 * time.Second) {
			shutdown()
			return nil, "", fmt.Errorf("cluster node %s not ready (route ports %v)", s.Name(), cports)
		}
		urls = append(urls, s.ClientURL())
	}
	t.Cleanup(shutdown)
	return out, strings.Join(urls, ","), nil
}

// TestClusterNodeLossLosesNothing: on a 3-node cluster (replicas 3), one
// node (the rollout stream's leader) is shut down while rollouts are in
// flight; the eval still gets exactly one result for every rollout.
//
// It once stalled on a loaded machine (0 of 12 results in 4 minutes):
// Collect's consumer-create request reached the cluster while it elected
// new leaders after the shutdown, its reply never came, and the request
// waited for the whole test context. Every API request is now bounded
// (apiTimeout) and retried. Reproduce a slow machine by freezing the test
// process 400 ms in every 450 (SIGSTOP/SIGCONT) with GOMAXPROCS=1;
// APODEX_TEST_NATS_LOG=1 logs the servers and workers.
func TestClusterNodeLossLosesNothing(t *testing.T) {
	nodes, url := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second) // 15 s alone; ~45 s frozen 9 tenths of the time
	defer cancel()
	ttl := 4 * time.Second
	var c *Conn
	var err error
	for c == nil { // JetStream's meta leader is elected after the routes form
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		c, err = Connect(actx, url, "test", ttl)
		acancel()
		if err != nil {
			t.Log(err)
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	defer c.Close()
	if c.Replicas != 3 {
		t.Fatalf("replicas %d on a 3-node cluster, want 3", c.Replicas)
	}
	home, plan := prepared(t, 4)
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, eval.Pending(plan, nil, "v")); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 64)
	slow := func(_ eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) {
		m, info, err := eval.Oracle(w)
		return delayed{m, started}, info, err
	}
	for _, name := range []string{"a", "b"} {
		wc := connect(t, url, ttl)
		w := &Worker{Conn: wc, Name: name, Version: "v", Parallel: 2, Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(), NewModel: slow}}
		if os.Getenv("APODEX_TEST_NATS_LOG") != "" {
			w.Log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", name)
			w.Progress = tWriter{t}
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		defer func() { stop(); <-done }()
	}
	<-started
	// Mid-eval, shut down the node that leads the rollout stream (with
	// one replica, the only one that holds the queue).
	info, err := c.rollouts.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %v", err)
	}
	killed := false
	for _, n := range nodes {
		if n.Name() == info.Cluster.Leader {
			n.Shutdown()
			killed = true
		}
	}
	if !killed {
		t.Fatalf("no node is the leader %q", info.Cluster.Leader)
	}

	col, err := eval.OpenCollector(eval.Options{Home: home}, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	if err := c.Collect(ctx, home, plan, col); err != nil {
		t.Fatalf("collect after a node died: %v (%d of %d)", err, col.Done(), col.Total())
	}
	results, _ := eval.ReadResults(home, plan.ID)
	seen := map[string]bool{}
	for _, r := range results {
		if seen[r.Key()] {
			t.Errorf("%s twice", r.Key())
		}
		seen[r.Key()] = true
	}
	if len(seen) != plan.Total() {
		t.Fatalf("%d distinct results of %d", len(seen), plan.Total())
	}
	if n := resultCount(t, c); n != uint64(plan.Total()) {
		t.Fatalf("%d result messages, want %d", n, plan.Total())
	}
}

// delayed slows each model call, so rollouts are in flight when a node
// dies, and says when calls start.
type delayed struct {
	llm.Model
	started chan struct{}
}

func (d delayed) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	select {
	case d.started <- struct{}{}:
	default:
	}
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return d.Model.Generate(ctx, req)
}

// testLogger writes a server's log (notices, warnings, errors) to the
// test's log, each line with the server's name and the time.
type testLogger struct {
	t    *testing.T
	name string
}

func (l testLogger) logf(level, format string, v ...any) {
	l.t.Logf("%s %s %s: %s", time.Now().Format("15:04:05.000"), l.name, level, fmt.Sprintf(format, v...))
}
func (l testLogger) Noticef(format string, v ...any) { l.logf("INF", format, v...) }
func (l testLogger) Warnf(format string, v ...any)   { l.logf("WRN", format, v...) }
func (l testLogger) Fatalf(format string, v ...any)  { l.logf("FTL", format, v...) }
func (l testLogger) Errorf(format string, v ...any)  { l.logf("ERR", format, v...) }
func (l testLogger) Debugf(format string, v ...any)  {}
func (l testLogger) Tracef(format string, v ...any)  {}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s %s", time.Now().Format("15:04:05.000"), strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
