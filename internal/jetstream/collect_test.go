package jetstream

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
)

// TestCollectSurvivesAConsumerNameNobodyAnswers is the stall of issue 30's
// cluster check, on one server: results are being collected when the
// collector's connection drops; nats.go's ordered consumer then creates
// its next consumer (a new name) and, in the cluster, that R1 consumer
// can be placed on the node just killed, which the others still count
// online: the creation goes unanswered, and so does every later request
// for that name. Here a proxy between the collector and the server plays
// that node: it withholds every creation request for the first consumer
// named after the cut. The collector must read on (on a consumer of
// another name) and end with every result once each; nats.go alone
// retried the dead name forever.
func TestCollectSurvivesAConsumerNameNobodyAnswers(t *testing.T) {
	s := embedded(t)
	p := newCreateDropper(t, s.URL())
	home, plan := prepared(t, 2)
	pub := connect(t, s.URL(), 0)
	jobs := eval.Pending(plan, nil, "v")
	publish := func(js []eval.Job) {
		for _, j := range js {
			raw, _ := json.Marshal(Outcome{Result: eval.Result{World: j.World.ID, Config: j.Config.Name, Rollout: j.Rollout, Status: "completed"}, Worker: "w"})
			if _, err := pub.js.Publish(context.Background(), resultSubjectOf(j), raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	half := len(jobs) / 2
	publish(jobs[:half])

	c := connect(t, "nats://"+p.addr(), 0)
	c.Log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	col, err := eval.OpenCollector(eval.Options{Home: home}, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Collect(ctx, home, plan, col) }()
	lines := func() int { rs, _ := eval.ReadResults(home, plan.ID); return len(rs) }
	for lines() < half {
		select {
		case err := <-done:
			t.Fatalf("Collect ended early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	p.arm() // the next consumer named is on the dead node
	p.cut()
	publish(jobs[half:])
	if err := <-done; err != nil {
		t.Fatalf("Collect: %v (%d of %d results; %d creation requests withheld for %q)", err, lines(), len(jobs), p.withheld(), p.deadName())
	}
	if p.withheld() == 0 {
		t.Fatal("no consumer creation was withheld: the test did not reproduce the dead node")
	}
	rs, err := eval.ReadResults(home, plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Key()] {
			t.Errorf("%s collected twice", r.Key())
		}
		seen[r.Key()] = true
	}
	if len(seen) != len(jobs) || len(rs) != len(jobs) {
		t.Fatalf("%d lines, %d rollouts, want %d", len(rs), len(seen), len(jobs))
	}
}

// createDropper is a TCP proxy to a NATS server that reads the client's
// side of the protocol and, once armed, withholds every request to create
// a consumer of the result stream named as the first one asked for.
type createDropper struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	armed   bool
	dead    string
	dropped int
	conns   []net.Conn
}

func newCreateDropper(t *testing.T, url string) *createDropper {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &createDropper{t: t, ln: l, target: strings.TrimPrefix(url, "nats://")}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", p.target)
			if err != nil {
				cc.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cc, sc)
			p.mu.Unlock()
			go func() { io.Copy(cc, sc); cc.Close(); sc.Close() }()
			go func() { p.forward(cc, sc); cc.Close(); sc.Close() }()
		}
	}()
	return p
}

func (p *createDropper) addr() string { return p.ln.Addr().String() }

func (p *createDropper) arm() { p.mu.Lock(); p.armed = true; p.mu.Unlock() }

// cut closes every connection through the proxy (the client reconnects
// through it).
func (p *createDropper) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *createDropper) withheld() int    { p.mu.Lock(); defer p.mu.Unlock(); return p.dropped }
func (p *createDropper) deadName() string { p.mu.Lock(); defer p.mu.Unlock(); return p.dead }

// forward copies the client's protocol to the server, message by message,
// leaving out what drop picks.
func (p *createDropper) forward(client io.Reader, server io.Writer) {
	r := bufio.NewReader(client)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		var payload []byte
		if len(f) >= 3 && (f[0] == "PUB" || f[0] == "HPUB") {
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			if p.drop(f[1]) {
				continue
			}
		}
		if _, err := io.WriteString(server, line); err != nil {
			return
		}
		if _, err := server.Write(payload); err != nil {
			return
		}
	}
}

// drop reports whether a message to subject is withheld: a creation of
// the dead consumer ($JS.API.CONSUMER.CREATE.<stream>.<name>[.<filter>]).
func (p *createDropper) drop(subject string) bool {
	tok := strings.Split(subject, ".")
	if len(tok) < 6 || !strings.HasPrefix(subject, "$JS.API.CONSUMER.CREATE."+ResultStream+".") {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return false
	}
	if p.dead == "" {
		p.dead = tok[5]
	}
	if tok[5] != p.dead {
		return false
	}
	p.dropped++
	return true
}

// TestCollectNowTakesLinesOnly: eval show from another host (CollectNow)
// writes the result lines and fetches no record and no abandoned run; a
// later collect of the same home (eval resume --wait, export --follow)
// fetches the records of the lines it finds and keeps the abandoned runs.
func TestCollectNowTakesLinesOnly(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 0)
	home, plan := prepared(t, 1)
	jobs := eval.Pending(plan, nil, "v")
	ctx := context.Background()
	ship := func(id string) {
		dir := filepath.Join(t.TempDir(), id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte("{}\n"), 0o644)
		if err := putDir(ctx, c.records, id, dir); err != nil {
			t.Fatal(err)
		}
	}
	const scored, dropped = "20261202-000000-aaaaaa", "20261202-000000-bbbbbb"
	ship(scored)
	ship(dropped)
	for i, j := range jobs {
		o := Outcome{Result: eval.Result{World: j.World.ID, Config: j.Config.Name, Rollout: j.Rollout, Status: "completed"}, Worker: "w"}
		if i == 0 {
			o.Result.RunID, o.Record = scored, scored
		}
		raw, _ := json.Marshal(o)
		if _, err := c.js.Publish(ctx, resultSubjectOf(j), raw); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(Abandoned{World: jobs[1].World.ID, Config: jobs[1].Config.Name, RunID: dropped, Worker: "w", Reason: "test", Shipped: true})
	if _, err := c.js.Publish(ctx, abandonedSubject+leaseKey(jobs[1]), raw); err != nil {
		t.Fatal(err)
	}

	n, err := c.CollectNow(ctx, eval.Options{Home: home}, plan)
	if err != nil || n != len(jobs) {
		t.Fatalf("CollectNow: %d lines, %v; want %d", n, err, len(jobs))
	}
	for _, id := range []string{scored, dropped} {
		if _, err := os.Stat(filepath.Join(home, "runs", id)); err == nil {
			t.Errorf("CollectNow fetched record %s", id)
		}
	}
	if ab := ReadAbandoned(home, plan.ID); len(ab) != 0 {
		t.Errorf("CollectNow kept abandoned runs %+v", ab)
	}

	if n, err := c.CollectEval(ctx, eval.Options{Home: home}, plan); err != nil || n != len(jobs) {
		t.Fatalf("CollectEval: %d lines, %v; want %d", n, err, len(jobs))
	}
	for _, id := range []string{scored, dropped} {
		if _, err := os.Stat(filepath.Join(home, "runs", id, "events.jsonl")); err != nil {
			t.Errorf("record %s not fetched by the collect after CollectNow: %v", id, err)
		}
	}
	if ab := ReadAbandoned(home, plan.ID); len(ab) != 1 || ab[0].RunID != dropped || !ab[0].Shipped {
		t.Errorf("abandoned runs after the collect: %+v, want %s, shipped", ab, dropped)
	}
	if rs, _ := eval.ReadResults(home, plan.ID); len(rs) != len(jobs) {
		t.Errorf("%d result lines, want %d (each once)", len(rs), len(jobs))
	}
}
