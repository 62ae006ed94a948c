package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/world"
)

// The failure checks of issue #30 against real nats-server processes:
// the server binary is built from the nats-server module go.mod already
// requires (no download; $APODEX_NATS_SERVER names another), once per
// test binary.

var natsBin struct {
	once sync.Once
	path string
	err  error
}

func natsServerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts nats-server processes; skipped with -short")
	}
	natsBin.once.Do(func() {
		if p := os.Getenv("APODEX_NATS_SERVER"); p != "" {
			natsBin.path = p
			return
		}
		version := "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "github.com/nats-io/nats-server/v2" {
					version = d.Version
				}
			}
		}
		natsBin.path = filepath.Join(os.TempDir(), "apodex-test-nats-server-"+version)
		if _, err := os.Stat(natsBin.path); err == nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			natsBin.err = fmt.Errorf("no go tool to build nats-server: %v", err)
			return
		}
		tmp := natsBin.path + fmt.Sprintf(".%d", os.Getpid())
		if out, err := exec.Command(goTool, "build", "-o", tmp, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
			natsBin.err = fmt.Errorf("build nats-server: %v\n%s", err, out)
			return
		}
		natsBin.err = os.Rename(tmp, natsBin.path)
	})
	if natsBin.err != nil {
		t.Fatal(natsBin.err)
	}
	return natsBin.path
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// natsNode is one nats-server process with JetStream and its monitoring
// port.
type natsNode struct {
	name       string
	url        string
	cmd        *exec.Cmd
	monitor    int
	logPath    string
	exited     chan struct{} // closed once the process is waited for
	killedOnce sync.Once
}

// natsCluster starts n nats-server processes on loopback (a cluster when
// n > 1) and waits until each reports JetStream healthy. The ports are
// picked free and then given to the servers, so another process may take
// one in between (CI runs packages in parallel): a node that exits or
// never gets healthy makes the cluster start again on new ports.
func natsCluster(t *testing.T, n int) ([]*natsNode, string) {
	t.Helper()
	bin := natsServerBinary(t)
	for attempt := 1; ; attempt++ {
		nodes, url, err := tryNATSCluster(t, bin, n)
		if err == nil {
			return nodes, url
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; again on new ports", attempt, err)
	}
}

func tryNATSCluster(t *testing.T, bin string, n int) ([]*natsNode, string, error) {
	ports := freePorts(t, 3*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i+1]))
	}
	var nodes []*natsNode
	var urls []string
	fail := func(err error) ([]*natsNode, string, error) {
		for _, nd := range nodes {
			nd.kill()
		}
		return nil, "", err
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		args := []string{"-n", name, "-a", "127.0.0.1", "-p", fmt.Sprint(ports[3*i]), "-m", fmt.Sprint(ports[3*i+2]), "-js", "-sd", t.TempDir()}
		if n > 1 {
			args = append(args, "--cluster_name", "apodex-test", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		}
		cmd := exec.Command(bin, args...)
		logPath := filepath.Join(t.TempDir(), name+".log")
		logf, _ := os.Create(logPath)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fail(err)
		}
		nd := &natsNode{name: name, url: fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i]), cmd: cmd, monitor: ports[3*i+2], logPath: logPath, exited: make(chan struct{})}
		go func() { cmd.Wait(); close(nd.exited) }()
		t.Cleanup(func() { nd.kill(); logf.Close() })
		nodes = append(nodes, nd)
		urls = append(urls, nd.url)
	}
	for _, nd := range nodes {
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.monitor))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			select {
			case <-nd.exited:
				raw, _ := os.ReadFile(nd.logPath)
				return fail(fmt.Errorf("nats-server %s exited (ports %v):\n%s", nd.name, ports, raw))
			default:
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("nats-server %s not healthy after a minute (ports %v): %v", nd.name, ports, err))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes, strings.Join(urls, ","), nil
}

func (nd *natsNode) kill() {
	nd.killedOnce.Do(func() {
		nd.cmd.Process.Signal(syscall.SIGCONT)
		nd.cmd.Process.Kill()
		<-nd.exited
	})
}

// streamInfo is what a node's /jsz says of a stream: its leader and how
// many messages it holds.
func (nd *natsNode) streamInfo(t *testing.T, stream string) (leader string, msgs uint64, ok bool) {
	t.Helper()
	jsz, err := nd.jsz(false)
	if err != nil {
		return "", 0, false
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.Cluster.Leader, s.State.Msgs, true
			}
		}
	}
	return "", 0, false
}

// oracleSuite writes a suite of rollouts rollouts on one world of each
// family, under a model served by a fake OpenAI endpoint that plays each
// world's solution, each answer after delay.
// While hold is set, answers wait.
func oracleSuite(t *testing.T, home string, rollouts int, delay time.Duration, hold *atomic.Bool) string {
	t.Helper()
	var ids []string
	for _, fam := range []string{"code", "file", "search"} {
		ids = append(ids, genIDs(t, home, fam, "--seed", "3", "--level", "1")[0])
	}
	st := world.NewStore(home)
	solutions := map[string][]llm.ToolCall{}
	objectives := map[string]string{}
	for _, id := range ids {
		w, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		solutions[id], _ = eval.SolutionCalls(w)
		objectives[id] = w.Manifest.Contract.Objective
	}
	model := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		time.Sleep(delay)
		for hold.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		first, turn := "", 0
		for _, m := range req.Messages {
			if m.Role == "user" && first == "" {
				first = m.Content
			}
			if m.Role == "assistant" {
				turn++
			}
		}
		usage := &llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}
		for id, obj := range objectives {
			if strings.HasPrefix(first, obj) {
				if turn == 0 {
					return llmtest.Turn{Calls: solutions[id], Usage: usage}
				}
				return llmtest.Turn{Calls: []llm.ToolCall{finish("done")}, Usage: usage}
			}
		}
		return llmtest.Turn{Status: 400}
	})
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf("name: procs\nrollouts: %d\nworlds: [{id: %s}, {id: %s}, {id: %s}]\nconfigs:\n  - {name: react, provider: openai, base_url: %q, model: m}\n",
		rollouts, ids[0], ids[1], ids[2], model.URL)), 0o644)
	return suite
}

// workerProc is an `apodex worker` child process.
type workerProc struct {
	cmd    *exec.Cmd
	home   string
	stderr *syncBuffer
}

func startWorker(t testing.TB, url, name string, parallel int, ttl string) *workerProc {
	t.Helper()
	home := t.TempDir()
	args, _ := json.Marshal([]string{"worker", "--nats", url, "--home", home, "--name", name, "--parallel", fmt.Sprint(parallel), "--sandbox", testSandbox(), "--lease-ttl", ttl})
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerChildProcess$")
	cmd.Env = append(os.Environ(), "APODEX_WORKER_CHILD_ARGS="+string(args))
	w := &workerProc{cmd: cmd, home: home, stderr: &syncBuffer{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return w
}

func (w *workerProc) runs() []string {
	ents, _ := os.ReadDir(filepath.Join(w.home, "runs"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func testSandbox() string {
	if _, err := exec.LookPath("bwrap"); err == nil {
		return "auto"
	}
	return "none"
}

// waitUntil polls cond every 50ms until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOneResultEach: results.jsonl has one passing line per rollout of
// the eval, none from a run in not.
func checkOneResultEach(t *testing.T, home, id string, total int, not map[string]bool) {
	t.Helper()
	rs, err := eval.ReadResults(home, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Key()] {
			t.Errorf("%s scored twice", r.Key())
		}
		seen[r.Key()] = true
		if r.Correct != 1 {
			t.Errorf("%s: %s %s (run %s, %+v)", r.Key(), r.Status, r.Error, r.RunID, r.Termination)
			if os.Getenv("APODEX_TEST_NATS_LOG") != "" {
				ev, err := os.ReadFile(filepath.Join(home, "runs", r.RunID, "events.jsonl"))
				var lines []string
				for _, l := range strings.Split(string(ev), "\n") {
					if strings.Contains(l, `"tool_result"`) || strings.Contains(l, `"run_finished"`) {
						lines = append(lines, l[:min(len(l), 600)])
					}
				}
				t.Logf("run %s (%v):\n%s", r.RunID, err, strings.Join(lines, "\n"))
			}
		}
		if not[r.RunID] {
			t.Errorf("%s was scored from run %s, which must not count", r.Key(), r.RunID)
		}
	}
	if len(rs) != total || len(seen) != total {
		t.Fatalf("%d result lines (%d distinct), want %d", len(rs), len(seen), total)
	}
}

// TestNATSClusterProcessesLoseNothing is the cluster check with
// real processes: three nats-server processes in a cluster on loopback,
// two `apodex worker` processes, an eval of 24 rollouts collected with
// --wait. Mid-eval the rollout stream's leader is frozen (SIGSTOP) past
// every lease and election timeout and then continued (SIGCONT); later,
// while rollouts are held mid-call, the stream's new leader is killed
// (SIGKILL). The eval still ends with one passing result per rollout and
// the result stream holds exactly one message per rollout.
//
// It once hung at 2 of 24 results after the kill with every result
// stored: the eval's reading of the results had to recreate its consumer
// after the kill, the cluster (which counts a SIGKILLed node online for
// minutes) placed it on the dead node, and nats.go retried that consumer's
// name forever. The reading now starts anew on a consumer of another name
// (internal/jetstream TestCollectSurvivesAConsumerNameNobodyAnswers). On a
// stall the test logs the workers, each live node's view of the streams
// and the eval's goroutines in the queue's package.
func TestNATSClusterProcessesLoseNothing(t *testing.T) {
	nodes, url := natsCluster(t, 3)
	home := t.TempDir()
	var hold atomic.Bool
	suite := oracleSuite(t, home, 8, 100*time.Millisecond, &hold)
	var workers []*workerProc
	for _, name := range []string{"w1", "w2"} {
		workers = append(workers, startWorker(t, url, name, 2, "5s"))
	}
	type exit struct {
		code           int
		stdout, stderr string
	}
	done := make(chan exit, 1)
	var evalOut, evalErr syncBuffer
	go func() {
		code := Run(context.Background(), []string{"eval", suite, "--home", home, "--nats", url, "--wait", "--quiet"}, &evalOut, &evalErr)
		done <- exit{code, evalOut.String(), evalErr.String()}
	}()
	var id string
	waitUntil(t, time.Minute, "no eval started", func() bool {
		ents, _ := os.ReadDir(filepath.Join(home, "evals"))
		if len(ents) == 1 {
			id = ents[0].Name()
		}
		return id != ""
	})
	lines := func() int { rs, _ := eval.ReadResults(home, id); return len(rs) }
	alive := map[*natsNode]bool{nodes[0]: true, nodes[1]: true, nodes[2]: true}
	leader := func() *natsNode {
		for nd := range alive {
			if l, _, ok := nd.streamInfo(t, jetstream.RolloutStream); ok {
				for other := range alive {
					if other.name == l {
						return other
					}
				}
			}
		}
		return nil
	}
	waitUntil(t, 2*time.Minute, "no result before the faults", func() bool { return lines() >= 1 })

	hold.Store(true) // rollouts in flight wait mid-call: the faults land mid-eval
	frozen := leader()
	if frozen == nil {
		t.Fatal("no node leads the rollout stream")
	}
	atFreeze := lines()
	frozen.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(12 * time.Second) // > lease TTL, ack wait and RAFT election timeouts
	frozen.cmd.Process.Signal(syscall.SIGCONT)
	hold.Store(false)
	before := lines()
	waitUntil(t, 2*time.Minute, "no result after the frozen node came back", func() bool { return lines() > before })

	hold.Store(true)
	var killed *natsNode
	waitUntil(t, time.Minute, "no leader after the freeze", func() bool { killed = leader(); return killed != nil })
	if n := lines(); n >= 24 {
		t.Fatalf("the eval ended (%d results) before the kill; slow its rollouts", n)
	}
	atKill := lines()
	killed.kill()
	delete(alive, killed)
	hold.Store(false)

	var e exit
	select {
	case e = <-done:
	case <-time.After(3 * time.Minute):
		for _, w := range workers {
			t.Logf("worker log:\n%s", w.stderr.String())
		}
		for nd := range alive {
			t.Log(nd.describe())
		}
		t.Logf("eval's stderr:\n%s\nthe eval's goroutines in the queue's package:\n%s", evalErr.String(), goroutinesIn("internal/jetstream"))
		t.Fatalf("the eval did not end within 3 minutes of the kill (%d of 24 results)", lines())
	}
	if e.code != 0 || !strings.Contains(e.stdout, "24 of 24") {
		rs, _ := eval.ReadResults(home, id)
		for _, r := range rs {
			if r.Correct != 1 {
				t.Logf("%s: %s run %s: %s", r.Key(), r.Status, r.RunID, r.Error)
			}
		}
		for _, w := range workers {
			t.Logf("worker log:\n%s", w.stderr.String())
		}
		t.Fatalf("eval --wait: exit %d\n%s%s", e.code, e.stdout, e.stderr)
	}
	checkOneResultEach(t, home, id, 24, nil)
	code, stdout, stderr := cli(t, "eval", "show", id, "--home", home, "--nats", url)
	if code != 0 || !strings.Contains(stdout, "results on "+url+": 24 ") {
		t.Errorf("eval show --nats: want 24 result messages on the queue: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("froze %s at %d of 24 results, killed %s at %d; the eval's warnings:\n%s", frozen.name, atFreeze, killed.name, atKill, e.stderr)
}

// TestStaleWorkerProcessCannotPublish is the stale worker with
// real processes: worker A takes every rollout and is frozen (SIGSTOP)
// mid-rollout past its lease; worker B scores them all; A is continued
// (SIGCONT), finishes its runs and is refused: each rollout keeps its one
// result, A's runs are marked abandoned and never counted.
func TestStaleWorkerProcessCannotPublish(t *testing.T) {
	nodes, url := natsCluster(t, 1)
	home := t.TempDir()
	var hold atomic.Bool
	hold.Store(true)
	suite := oracleSuite(t, home, 1, 0, &hold)
	code, stdout, stderr := cli(t, "eval", suite, "--home", home, "--nats", url, "--quiet")
	if code != 0 || !strings.Contains(stdout, "queued") {
		t.Fatalf("eval --nats: exit %d\n%s%s", code, stdout, stderr)
	}
	id := strings.TrimSuffix(strings.Fields(stdout)[1], ":")

	a := startWorker(t, url, "stale", 3, "3s")
	waitUntil(t, time.Minute, "worker a did not start the 3 rollouts", func() bool { return len(a.runs()) == 3 })
	time.Sleep(300 * time.Millisecond) // a is waiting on its model calls
	a.cmd.Process.Signal(syscall.SIGSTOP)
	hold.Store(false) // a's answers wait in its sockets until it runs again

	startWorker(t, url, "fresh", 3, "3s")
	code, stdout, stderr = cli(t, "eval", "resume", id, "--home", home, "--nats", url, "--wait", "--quiet")
	if code != 0 || !strings.Contains(stdout, "3 of 3") {
		t.Fatalf("eval resume --wait: exit %d\n%s%s", code, stdout, stderr)
	}
	staleRuns := map[string]bool{}
	for _, r := range a.runs() {
		staleRuns[r] = true
	}

	a.cmd.Process.Signal(syscall.SIGCONT)
	waitUntil(t, time.Minute, "the revived worker's runs were not all marked abandoned:\n"+a.stderr.String(), func() bool {
		for r := range staleRuns {
			if _, err := os.Stat(filepath.Join(a.home, "runs", r, "ABANDONED")); err != nil {
				return false
			}
		}
		return true
	})
	// a reports its three runs abandoned (3 results + 3 reports).
	waitUntil(t, time.Minute, "the revived worker did not report its abandoned runs", func() bool {
		_, msgs, _ := nodes[0].streamInfo(t, jetstream.ResultStream)
		return msgs >= 6
	})
	checkOneResultEach(t, home, id, 3, staleRuns)
	// A collect of the finished eval keeps what was reported since: the
	// revived worker's runs, abandoned, with their records.
	code, stdout, stderr = cli(t, "eval", "resume", id, "--home", home, "--nats", url, "--wait", "--quiet")
	if code != 0 || !strings.Contains(stdout, "3 runs abandoned") {
		t.Fatalf("eval resume --wait after the revival: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, ab := range jetstream.ReadAbandoned(home, id) {
		if !staleRuns[ab.RunID] || ab.Worker != "stale" || !ab.Shipped {
			t.Errorf("abandoned %+v: want a shipped run of the stale worker", ab)
		}
		if _, err := os.Stat(filepath.Join(home, "runs", ab.RunID, "events.jsonl")); err != nil {
			t.Errorf("abandoned run %s not on the eval's home: %v", ab.RunID, err)
		}
	}
	checkOneResultEach(t, home, id, 3, staleRuns)
	if _, msgs, ok := nodes[0].streamInfo(t, jetstream.ResultStream); !ok || msgs != 6 {
		t.Fatalf("the result stream holds %d messages (found %v), want 3 results and 3 abandoned runs", msgs, ok)
	}
}
