package main

// Interventions on a live run (issue 6; SPEC §9 R-MSG, R-CONTRACT-3/4),
// checked from outside: the CLI runs in-process against a team run whose
// model endpoint is a gate in front of the fake OpenAI server. The gate
// sees every request body the model would receive, in arrival order, and
// holds the ones the test picks until the test releases them, so the test
// decides what is in flight instead of sleeping.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// ivPatience bounds every wait for something the run must do; a run that
// never does it fails the test instead of hanging it.
const ivPatience = 15 * time.Second

// ivQuiet is how long a test watches for something that must NOT happen
// (a model request while paused): many times the inbox's 50 ms poll, so a
// run that would act on the change has had every chance to.
const ivQuiet = 600 * time.Millisecond

// --- the gate ---

// ivReq is one request as it reached the gate.
type ivReq struct {
	N     int    // arrival order, from 0
	Agent string // lead, sub (a subagent) or main (a react agent)
	Raw   string // the whole body
	Msgs  []llmtest.Message

	held     chan struct{} // nil: forwarded at once
	released bool
}

// ivGate stands between the run and the fake server. Holding happens
// outside the fake server's lock, so other agents' requests go on.
type ivGate struct {
	url     string // what --base-url gets
	backend string // the fake server's root

	mu     sync.Mutex
	reqs   []*ivReq
	hold   map[string]bool // agents whose requests are held
	open   chan struct{}   // closed: nothing is held any more
	opened bool
}

func newIVGate(t *testing.T, backend *llmtest.Server, hold ...string) *ivGate {
	t.Helper()
	g := &ivGate{backend: strings.TrimSuffix(backend.URL, "/v1"), hold: map[string]bool{}, open: make(chan struct{})}
	for _, a := range hold {
		g.hold[a] = true
	}
	hs := httptest.NewServer(http.HandlerFunc(g.serve))
	g.url = hs.URL + "/v1"
	t.Cleanup(func() { g.openAll(); hs.Close() })
	return g
}

// ivAgentOf tells the agent behind a request by the tools it is offered.
func ivAgentOf(tools []string) string {
	switch {
	case slices.Contains(tools, "dispatch"):
		return "lead"
	case slices.Contains(tools, "report"):
		return "sub"
	}
	return "main"
}

func (g *ivGate) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	json.Unmarshal(raw, &body) // a bad body is the fake server's to report
	var tools []string
	for _, tl := range body.Tools {
		tools = append(tools, tl.Function.Name)
	}
	rq := &ivReq{Agent: ivAgentOf(tools), Raw: string(raw)}
	for _, m := range body.Messages {
		var s string
		json.Unmarshal(m.Content, &s)
		rq.Msgs = append(rq.Msgs, llmtest.Message{Role: m.Role, Content: s})
	}
	g.mu.Lock()
	rq.N = len(g.reqs)
	if g.hold[rq.Agent] && !g.opened {
		rq.held = make(chan struct{})
	}
	g.reqs = append(g.reqs, rq)
	g.mu.Unlock()
	if rq.held != nil {
		select {
		case <-rq.held:
		case <-g.open:
		case <-r.Context().Done(): // the run gave up on it: the model never answers
			return
		}
	}
	// Once forwarded, the fake server reads the whole body even if the run
	// gives up meanwhile (it would report a torn body as a test failure).
	fwd, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, g.backend+r.URL.Path, bytes.NewReader(raw))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fwd.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(fwd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// all is every request so far, in arrival order.
func (g *ivGate) all() []*ivReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reqs)
}

func (g *ivGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

// setHold starts or stops holding agent's requests from now on.
func (g *ivGate) setHold(agent string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold[agent] = on
}

// release lets one held request through to the fake server.
func (g *ivGate) release(rq *ivReq) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rq != nil && rq.held != nil && !rq.released {
		rq.released = true
		close(rq.held)
	}
}

// openAll releases everything, now and later.
func (g *ivGate) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened {
		g.opened = true
		close(g.open)
	}
}

// heldOf is agent's request the gate is holding now, or nil.
func (g *ivGate) heldOf(agent string) *ivReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rq := range g.reqs {
		if rq.Agent == agent && rq.held != nil && !rq.released && !g.opened {
			return rq
		}
	}
	return nil
}

// ivUserMessages are the contents of the user messages the request carries
// that the run marked as user messages ("[user message M3 · class]").
func ivUserMessages(rq *ivReq) []string {
	var out []string
	for _, m := range rq.Msgs {
		if m.Role == "user" && strings.HasPrefix(m.Content, "[user message ") {
			out = append(out, m.Content)
		}
	}
	return out
}

// --- the run ---

// ivScript answers an agent's k-th request (k from 0).
type ivScript func(k int, req llmtest.Request) llmtest.Turn

// ivRun is a team run playing in the background.
type ivRun struct {
	t        *testing.T
	patience time.Duration // bounds waitFor and the cleanup
	g        *ivGate
	home     string
	dir, id  string
	stop     context.CancelFunc
	done     chan struct{}
	code     int
	out, err bytes.Buffer // written by the run; read after done
}

// ivStart starts `apodex run --mode team` with the lead and subagents
// answered by the scripts and the flags in extra; the gate holds the
// requests of the agents named in hold. It returns once the run exists.
func ivStart(t *testing.T, lead, sub ivScript, hold []string, extra ...string) *ivRun {
	t.Helper()
	// Not t.TempDir: its cleanup fails the test when a goroutine of the run
	// writes after the run returned, which TestNothingWritesAfterTheRunReturns
	// checks on its own; here the home is removed after the run, whatever.
	home, err := os.MkdirTemp("", "apodex-iv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home); os.RemoveAll(home) })
	count := map[string]int{}
	srv := llmtest.NewOpenAI(t, func(_ int, req llmtest.Request) llmtest.Turn { // called under the server's lock
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Name)
		}
		agent := ivAgentOf(tools)
		k := count[agent]
		count[agent]++
		if agent == "sub" {
			return sub(k, req)
		}
		return lead(k, req)
	})
	r := &ivRun{t: t, g: newIVGate(t, srv, hold...), home: home, done: make(chan struct{}), patience: ivPatience}
	args := []string{"run", "--home", r.home, "--provider", "openai", "--base-url", r.g.url, "--model", "m",
		"--mode", "team", "--isolation", "shared", "--json", "--quiet", "--retries", "1"}
	args = append(append(args, extra...), "Find out what the workspace holds and report it.")
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	go func() {
		defer close(r.done)
		r.code = Run(ctx, args, &r.out, &r.err)
	}()
	t.Cleanup(func() { // before the gate's and the server's cleanups
		r.stop()
		r.g.openAll()
		select {
		case <-r.done:
		case <-time.After(r.patience):
			t.Errorf("the run did not end within %s of its context being cancelled", r.patience)
		}
	})
	r.waitFor("the run's first model request", func() bool { return r.g.count() > 0 })
	r.dir = onlyRun(t, r.home)
	r.id = filepath.Base(r.dir)
	return r
}

// waitFor polls cond until it holds; it fails the test if the run ends
// first or r.patience passes.
func (r *ivRun) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.After(r.patience)
	for !cond() {
		select {
		case <-r.done:
			if cond() {
				return
			}
			r.t.Fatalf("the run ended (exit %d) before %s\nstdout: %s\nstderr: %s", r.code, what, r.out.String(), r.err.String())
		case <-deadline:
			r.t.Fatalf("gave up after %s waiting for %s", r.patience, what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// next is the first request of agent at or after arrival n.
func (r *ivRun) next(agent string, n int) *ivReq {
	r.t.Helper()
	var got *ivReq
	r.waitFor(fmt.Sprintf("a %s request after request %d", agent, n), func() bool {
		for _, rq := range r.g.all() {
			if rq.N >= n && rq.Agent == agent {
				got = rq
				return true
			}
		}
		return false
	})
	return got
}

// held waits until the gate holds a request of agent.
func (r *ivRun) held(agent string) *ivReq {
	r.t.Helper()
	var got *ivReq
	r.waitFor("a held "+agent+" request", func() bool { got = r.g.heldOf(agent); return got != nil })
	return got
}

// finish waits for the run to end and returns its exit code and summary.
func (r *ivRun) finish() (int, run.Summary) {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(ivPatience):
		r.t.Fatalf("the run did not end within %s", ivPatience)
	}
	return r.code, decodeSummary(r.t, r.out.String())
}

// cli runs an apodex command against the run's home.
func (r *ivRun) cli(args ...string) (int, string, string) {
	r.t.Helper()
	return cli(r.t, append([]string{args[0], "--home", r.home}, args[1:]...)...)
}

// events reads the record as it is now (the run may be writing it).
func (r *ivRun) events() []record.Event {
	r.t.Helper()
	c, err := record.Read(r.dir)
	if err != nil {
		r.t.Fatalf("reading the record: %v", err)
	}
	return c.Events
}

// messages is `apodex messages RUN --json`.
func (r *ivRun) messages() []inbox.Message {
	r.t.Helper()
	code, out, errOut := r.cli("messages", r.id, "--json")
	if code != 0 {
		r.t.Fatalf("apodex messages: exit %d: %s", code, errOut)
	}
	var ms []inbox.Message
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		r.t.Fatalf("apodex messages --json: %v\n%s", err, out)
	}
	return ms
}

// ivCount counts agent's events of type typ (tool_call, tool_result) for
// tool name.
func ivCount(evs []record.Event, typ, agent, name string) int {
	n := 0
	for _, e := range evs {
		if e.Type != typ || e.Agent != agent {
			continue
		}
		var c struct{ Name string }
		if e.Decode(&c) == nil && c.Name == name {
			n++
		}
	}
	return n
}

// leadWaiting waits until the lead is blocked in wait and its subagent's
// model request is held by the gate: nothing can end the wait but a user.
func (r *ivRun) leadWaiting() *ivReq {
	r.t.Helper()
	sub := r.held("sub")
	r.waitFor("the lead blocked in wait", func() bool {
		evs := r.events()
		return ivCount(evs, record.TypeToolCall, "lead", "wait") > ivCount(evs, record.TypeToolResult, "lead", "wait")
	})
	return sub
}

// ivMessageEvent is a message event of the record.
type ivMessageEvent struct {
	Seq    int64  `json:"seq"`
	ID     string `json:"id"`
	Text   string `json:"text"`
	Class  string `json:"class"`
	Answer string `json:"answer"`
}

func ivMessageEvents(evs []record.Event) []ivMessageEvent {
	var out []ivMessageEvent
	for _, e := range evs {
		if e.Type == record.TypeMessage {
			var m ivMessageEvent
			if e.Decode(&m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// ivControls are the control events' kinds, in record order.
func ivControls(evs []record.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == record.TypeControl {
			var c struct{ Kind string }
			e.Decode(&c)
			out = append(out, c.Kind)
		}
	}
	return out
}

// --- scripts ---

var (
	ivDispatch = calls(
		call("board_add", map[string]any{"title": "Survey", "objective": "List what /workspace holds"}),
		call("dispatch", map[string]any{"item": "T1", "role": "surveyor", "instructions": "List /workspace and report what is there."}))
	ivWait = calls(call("wait", map[string]any{"timeout_s": 120}))
	ivView = calls(call("board_view", map[string]any{}))
)

// ivLead plays turns, then after (nil: ivUntilReport).
func ivLead(after ivScript, turns ...llmtest.Turn) ivScript {
	if after == nil {
		after = ivUntilReport
	}
	return func(k int, req llmtest.Request) llmtest.Turn {
		if k < len(turns) {
			return turns[k]
		}
		return after(k, req)
	}
}

// ivUntilReport waits until the subagent's report is in the lead's
// history, then resolves T1 and finishes.
func ivUntilReport(_ int, req llmtest.Request) llmtest.Turn {
	for _, m := range req.Messages {
		if m.Role != "assistant" && strings.Contains(m.Content, ivSubReport) {
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "the surveyor reported", "refs": []string{"report:A1"}}),
				finish("the workspace is empty"))
		}
	}
	return ivWait
}

// ivSubReport is what the default subagent reports.
const ivSubReport = "SUBREPORT the workspace is empty"

// ivSub looks at /workspace, then reports.
func ivSub(k int, _ llmtest.Request) llmtest.Turn {
	if k == 0 {
		return calls(call("list_files", map[string]any{"path": "/workspace"}))
	}
	return calls(call("report", map[string]any{"summary": ivSubReport}))
}

// --- the tests ---

// A lead blocked in wait on a running subagent receives `apodex say` in its
// very next request, marked with the message's class; the message becomes
// delivered with the seq of its message event (R-MSG-2, R-MSG-3).
func TestSayReachesLeadBlockedInWait(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"})
	r.leadWaiting()
	before := r.g.count()
	text := "Use the 2023 census figures for the totals."
	code, out, errOut := r.cli("say", r.id, text)
	if code != 0 || out != "M1\n" {
		t.Fatalf("apodex say: exit %d, stdout %q (want the id alone), stderr %s", code, out, errOut)
	}
	req := r.next("lead", before)
	if req.N != before {
		t.Errorf("request %d after the say is not the lead's (the lead's is %d)", before, req.N)
	}

	r.waitFor("M1 delivered", func() bool {
		ms, _ := inbox.List(r.dir)
		return len(ms) == 1 && ms[0].State == inbox.StateDelivered
	})
	ms := r.messages()
	m := ms[0]
	if m.ID != "M1" || m.State != inbox.StateDelivered || m.Seq <= 0 || m.Text != text || !m.Class.Valid() {
		t.Fatalf("messages --json: %+v", m)
	}
	mark := fmt.Sprintf("[user message M1 · %s]", m.Class)
	if um := ivUserMessages(req); len(um) != 1 || !strings.HasPrefix(um[0], mark) || !strings.Contains(um[0], text) {
		t.Errorf("the lead's next request carries user messages %q, want one starting %q with the text", um, mark)
	}

	evs := r.events()
	if m.Seq > int64(len(evs)) || evs[m.Seq-1].Type != record.TypeMessage {
		t.Fatalf("delivered at seq %d, which is not a message event", m.Seq)
	}
	var ev ivMessageEvent
	evs[m.Seq-1].Decode(&ev)
	if ev.ID != "M1" || ev.Text != text || ev.Class != string(m.Class) {
		t.Errorf("the message event at seq %d is %+v", m.Seq, ev)
	}
	// Acknowledged in the step that puts it into the history: the next lead
	// event after the delivery is the model_request carrying it.
	for _, e := range evs[m.Seq:] {
		if e.Agent == "lead" {
			if e.Type != record.TypeModelRequest {
				t.Errorf("after the delivery (seq %d) the lead's next event is %s (seq %d), not its model request", m.Seq, e.Type, e.Seq)
			}
			break
		}
	}
	code, out, _ = r.cli("messages", r.id)
	if code != 0 || !regexp.MustCompile(`M1\s+delivered\s+`+fmt.Sprint(m.Seq)+`\s+`+string(m.Class)).MatchString(out) {
		t.Errorf("apodex messages: exit %d\n%s", code, out)
	}
}

// Before delivery a message can be withdrawn (it never reaches the model)
// or updated (only the new text reaches it); after delivery both are
// refused with the seq of the delivery.
func TestWithdrawAndUpdateBeforeDelivery(t *testing.T) {
	// The lead's call that carries M1 is held; its answer (board_view) leads
	// straight to the next call, which must carry M3 in its new text.
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait, ivView), ivSub, []string{"sub"})
	r.leadWaiting()
	r.g.setHold("lead", true)
	if code, out, errOut := r.cli("say", r.id, "Prefer primary sources."); code != 0 || out != "M1\n" {
		t.Fatalf("say: exit %d %q %s", code, out, errOut)
	}
	leadReq := r.held("lead") // the lead's call after M1 woke it waits at the gate
	if um := ivUserMessages(leadReq); len(um) != 1 || !strings.HasSuffix(um[0], "\nPrefer primary sources.") {
		t.Fatalf("the held lead request carries %q, want M1", um)
	}

	say := func(text string) string {
		t.Helper()
		code, out, errOut := r.cli("say", r.id, text)
		if code != 0 {
			t.Fatalf("say %q: exit %d: %s", text, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	withdrawn := say("Also count the zebra files.")
	old := say("Round to walrus precision.")
	if withdrawn != "M2" || old != "M3" {
		t.Fatalf("ids %s, %s, want M2, M3", withdrawn, old)
	}
	if code, out, errOut := r.cli("say", r.id, "--update", old, "Round to giraffe precision."); code != 0 || out != "M3\n" {
		t.Fatalf("update: exit %d %q %s", code, out, errOut)
	}
	if code, out, errOut := r.cli("say", r.id, "--withdraw", withdrawn); code != 0 || out != "M2\n" {
		t.Fatalf("withdraw: exit %d %q %s", code, out, errOut)
	}
	if code, _, errOut := r.cli("say", r.id, "--withdraw", withdrawn); code != 1 || !strings.Contains(errOut, "withdrawn") {
		t.Errorf("withdrawing twice: exit %d: %s", code, errOut)
	}
	if code, _, errOut := r.cli("say", r.id, "--update", "M9", "x"); code != 1 || !strings.Contains(errOut, "no such message") {
		t.Errorf("updating a message that does not exist: exit %d: %s", code, errOut)
	}

	ms := r.messages()
	if len(ms) != 3 || ms[0].State != inbox.StateDelivered || ms[1].State != inbox.StateWithdrawn ||
		ms[2].State != inbox.StateUpdated || ms[2].Text != "Round to giraffe precision." || ms[2].Original != "Round to walrus precision." {
		t.Fatalf("messages while the lead's request is held: %+v", ms)
	}
	tooLate := func(id string, seq int64) {
		t.Helper()
		for _, args := range [][]string{{"--update", id, "new words"}, {"--withdraw", id}} {
			code, out, errOut := r.cli(append([]string{"say", r.id}, args...)...)
			if code != 1 || out != "" || !strings.Contains(errOut, "delivered") || !strings.Contains(errOut, fmt.Sprintf("seq %d", seq)) {
				t.Errorf("say %v after delivery: exit %d, stdout %q, stderr %q; want exit 1 naming the delivery's seq %d", args, code, out, errOut, seq)
			}
		}
	}
	tooLate("M1", ms[0].Seq)

	before := r.g.count()
	r.g.setHold("lead", false)
	r.g.release(leadReq)
	req := r.next("lead", before)
	um := ivUserMessages(req)
	if len(um) != 2 || !strings.HasPrefix(um[1], "[user message M3 · ") || !strings.HasSuffix(um[1], "\nRound to giraffe precision.") {
		t.Errorf("the lead's next request carries %q, want M1 and M3 in its new text", um)
	}
	r.waitFor("M3 delivered", func() bool {
		ms, _ := inbox.List(r.dir)
		return len(ms) == 3 && ms[2].State == inbox.StateDelivered
	})
	ms = r.messages()
	tooLate("M3", ms[2].Seq)
	if ms[1].State != inbox.StateWithdrawn {
		t.Errorf("M2 is %s after the run delivered, want withdrawn", ms[1].State)
	}

	for _, rq := range r.g.all() {
		for _, never := range []string{"zebra", "walrus"} {
			if strings.Contains(rq.Raw, never) {
				t.Errorf("request %d (%s) contains %q, which was withdrawn or replaced before delivery", rq.N, rq.Agent, never)
			}
		}
	}
	var ids []string
	for _, m := range ivMessageEvents(r.events()) {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"M1", "M3"}) {
		t.Errorf("message events %v, want M1 and M3", ids)
	}
}

// pause stops model requests, of the lead and of its subagents, until
// resume; both are recorded as control events. A message sent and withdrawn
// while paused never reaches the model.
func TestPauseStopsModelRequestsUntilResume(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"})
	sub := r.leadWaiting()
	if code, out, errOut := r.cli("pause", r.id); code != 0 || !strings.Contains(out, "pause sent") {
		t.Fatalf("pause: exit %d %q %s", code, out, errOut)
	}
	r.waitFor("the pause applied (a control event)", func() bool { return slices.Contains(ivControls(r.events()), "pause") })

	// From now until resume no request may arrive. The subagent's request
	// in flight is answered; its next call must wait for resume (the gate
	// would hold it too, but it must not even arrive).
	n := r.g.count()
	r.g.release(sub)
	r.waitFor("the subagent's list_files to end", func() bool {
		return ivCount(r.events(), record.TypeToolResult, "A1", "list_files") == 1
	})
	if code, out, _ := r.cli("say", r.id, "Check the okapi folder too."); code != 0 || out != "M1\n" {
		t.Fatalf("say while paused: exit %d %q", code, out)
	}
	if code, _, errOut := r.cli("say", r.id, "--withdraw", "M1"); code != 0 {
		t.Fatalf("withdraw while paused: exit %d %s", code, errOut)
	}
	code, out, _ := r.cli("status", r.id, "--json")
	var p runview.Progress
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || !p.Paused || p.Liveness != runview.Live {
		t.Errorf("status while paused: exit %d\n%s", code, out)
	}

	quiet := time.After(ivQuiet)
	for waiting := true; waiting; {
		select {
		case <-quiet:
			waiting = false
		case <-time.After(10 * time.Millisecond):
			if got := r.g.count(); got != n {
				rq := r.g.all()[n]
				t.Fatalf("a %s model request (#%d) arrived while the run was paused, before resume was sent", rq.Agent, rq.N)
			}
		}
	}
	if code, out, errOut := r.cli("resume", r.id); code != 0 || !strings.Contains(out, "resume sent") {
		t.Fatalf("resume: exit %d %q %s", code, out, errOut)
	}
	r.waitFor("a model request after resume", func() bool { return r.g.count() > n })
	// The subagent goes on; the lead stays in wait (nothing it must hear
	// arrived: the only message was withdrawn) until the subagent reports.
	r.waitFor("the subagent calling the model again", func() bool {
		for _, rq := range r.g.all()[n:] {
			if rq.Agent == "sub" {
				return true
			}
		}
		return false
	})
	if got := ivControls(r.events()); !slices.Equal(got, []string{"pause", "resume"}) {
		t.Errorf("control events %v, want pause then resume", got)
	}
	for _, rq := range r.g.all() {
		if strings.Contains(rq.Raw, "okapi") {
			t.Errorf("request %d contains a message withdrawn while paused", rq.N)
		}
	}
}

// cancel ends a live run: termination cancelled, exit 1, the record closed
// and gapless, the outputs delivered before the cancel kept. A finished run
// then refuses messages and controls.
func TestCancelEndsLiveRun(t *testing.T) {
	claim := calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/answer.txt"}}))
	write := calls(call("write_file", map[string]any{"path": "/outputs/answer.txt", "content": "42\n"}))
	r := ivStart(t, ivLead(nil, claim, write, ivDispatch, ivWait), ivSub, []string{"sub"})
	r.leadWaiting()
	if code, out, errOut := r.cli("cancel", r.id); code != 0 || !strings.Contains(out, "cancel sent") {
		t.Fatalf("cancel: exit %d %q %s", code, out, errOut)
	}
	code, s := r.finish()
	if code != 1 || s.Termination != "cancelled" || s.Status != run.StatusFailed {
		t.Errorf("exit %d, summary %+v", code, s)
	}
	evs := runtest.Events(t, r.dir)
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if evs[len(evs)-1].Type != record.TypeRunFinished {
		t.Errorf("the record ends with %s, not run_finished", evs[len(evs)-1].Type)
	}
	var fin record.RunFinished
	evs[len(evs)-1].Decode(&fin)
	if fin.Termination != "cancelled" {
		t.Errorf("run_finished says %q", fin.Termination)
	}
	if got := ivControls(evs); !slices.Equal(got, []string{"cancel"}) {
		t.Errorf("control events %v, want one cancel", got)
	}
	if got := fileContent(t, filepath.Join(r.dir, "outputs", "answer.txt")); got != "42\n" {
		t.Errorf("/outputs/answer.txt holds %q after the cancel", got)
	}
	if s.Delivery == nil || len(s.Delivery.Entries) != 1 || s.Delivery.Entries[0].Status != publish.Delivered {
		t.Errorf("delivery %+v, want /outputs/answer.txt delivered", s.Delivery)
	}
	if p, err := runview.Status(r.dir); err != nil || p.Liveness != runview.Finished {
		t.Errorf("liveness after cancel: %+v %v", p.Liveness, err)
	}

	for _, args := range [][]string{{"say", r.id, "one more thing"}, {"cancel", r.id}, {"pause", r.id}, {"say", r.id, "--budget", "turns=+5"}} {
		code, out, errOut := r.cli(args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "has finished") || !strings.Contains(errOut, r.id) {
			t.Errorf("%v to a finished run: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if ms, err := inbox.List(r.dir); err != nil || len(ms) != 0 {
		t.Errorf("a finished run kept messages sent after it ended: %+v %v", ms, err)
	}
}

// cancel acts on the runtime whatever the model does: a run whose model
// call is in flight (a slow model) ends as cancelled without waiting for it.
func TestCancelWhileModelCallInFlight(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"lead"})
	r.held("lead")
	if code, _, errOut := r.cli("cancel", r.id); code != 0 {
		t.Fatalf("cancel: exit %d %s", code, errOut)
	}
	select {
	case <-r.done:
	case <-time.After(5 * time.Second): // a hundred inbox polls
		t.Fatalf("the run was still live 5 s after `apodex cancel` while its model call was in flight; controls are applied only before a model call")
	}
	code, s := r.finish()
	if code != 1 || s.Termination != "cancelled" {
		t.Errorf("exit %d, termination %q", code, s.Termination)
	}
	if got := ivControls(runtest.Events(t, r.dir)); !slices.Equal(got, []string{"cancel"}) {
		t.Errorf("control events %v, want the cancel recorded", got)
	}
}

// Every goroutine of a run ends with it: once `apodex run` has returned,
// nothing writes into the run directory. Here the livecmd.Sender of a cancel still
// holds the inbox lock after writing its line (as a livecmd.Sender in another
// process may, between its write and its fsync) while the run applies it.
func TestNothingWritesAfterTheRunReturns(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"lead"})
	r.held("lead")
	unlock := ivLockInbox(t, r.dir)
	line := fmt.Sprintf(`{"op":"control","id":"C1","kind":"cancel","time":%q}`+"\n", time.Now().UTC().Format(time.RFC3339Nano))
	f, err := os.OpenFile(filepath.Join(r.dir, inbox.InboxFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r.waitFor("the cancel recorded", func() bool { return slices.Contains(ivControls(r.events()), "cancel") })
	select {
	case <-r.done: // the run returned: from now on nothing may write into its directory
		ivQuietDir(t, r.dir, unlock)
	case <-time.After(ivQuiet): // the run waits for its goroutines, one of them for the lock
		unlock()
		r.finish()
		ivQuietDir(t, r.dir, func() {})
	}
	if code, s := r.finish(); code != 1 || s.Termination != "cancelled" {
		t.Errorf("exit %d, termination %q", code, s.Termination)
	}
	if got := ivControls(runtest.Events(t, r.dir)); !slices.Equal(got, []string{"cancel"}) {
		t.Errorf("control events %v: the cancel that ended the run is not in its record", got)
	}
}

// ivLockInbox takes the run's inbox lock as a livecmd.Sender does.
func ivLockInbox(t *testing.T, dir string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, inbox.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// ivQuietDir asserts that nothing writes into a run directory once the run
// has returned (every goroutine of the run has ended with it), from before
// then() is called until ivQuiet after.
func ivQuietDir(t *testing.T, dir string, then func()) {
	t.Helper()
	snap := func() map[string]int64 {
		m := map[string]int64{}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					m[p] = fi.Size()
				}
			}
			return nil
		})
		return m
	}
	before := snap()
	then()
	time.Sleep(ivQuiet) // a goroutine left running would write within it
	after := snap()
	for p, n := range after {
		if m, ok := before[p]; !ok || m != n {
			t.Errorf("%s changed after the run returned (%d -> %d bytes): a goroutine of the run outlived it", p, m, n)
		}
	}
}

// status answers while the run works, from the board and the record,
// without adding an event, writing the inbox or causing a model request.
func TestStatusAnswersWithoutDisturbing(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"})
	r.leadWaiting()
	evs, reqs := len(r.events()), r.g.count()
	inboxBefore, _ := os.ReadFile(filepath.Join(r.dir, inbox.InboxFile))

	code, out, errOut := r.cli("status", r.id)
	if code != 0 || !strings.Contains(out, "(live)") || !strings.Contains(out, "board: 1 items") || !strings.Contains(out, "T1") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = r.cli("status", r.id, "--json")
	var p runview.Progress
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	if p.Liveness != runview.Live || p.Paused || p.RunID != r.id || p.Board.Total() != 1 || p.Board.InProgress != 1 ||
		p.Assignments["A1"] != "running" || p.Turns != 2 {
		t.Errorf("status --json while the lead waits: %+v", p)
	}
	if code, out, _ := r.cli("messages", r.id); code != 0 || out != "no messages\n" {
		t.Errorf("messages: exit %d %q", code, out)
	}

	time.Sleep(ivQuiet) // give a disturbed run time to show it; nothing must happen
	if got := len(r.events()); got != evs {
		t.Errorf("the record grew from %d to %d events around status", evs, got)
	}
	if got := r.g.count(); got != reqs {
		t.Errorf("%d model requests arrived around status", got-reqs)
	}
	if after, _ := os.ReadFile(filepath.Join(r.dir, inbox.InboxFile)); !bytes.Equal(after, inboxBefore) {
		t.Errorf("status wrote to the inbox")
	}
}

// A progress question sent with say is answered by the runtime from the
// board and recorded with the message; the model never sees it, and the
// run keeps answering other processes (R-MSG-4).
func TestProgressQueryAnsweredByRuntime(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"})
	r.patience = 5 * time.Second // a deadlocked run cannot be stopped; do not wait long for it
	r.leadWaiting()
	if code, out, _ := r.cli("say", r.id, "How is it going?"); code != 0 || out != "M1\n" {
		t.Fatalf("say: exit %d %q", code, out)
	}
	// The lead calls the model again at the latest when its subagent reports.
	r.g.setHold("sub", false)
	r.g.release(r.g.heldOf("sub"))
	delivered := func() bool { // reads the state file without the inbox lock
		b, _ := os.ReadFile(filepath.Join(r.dir, inbox.StateFile))
		return strings.Contains(string(b), `"op":"delivered","id":"M1"`)
	}
	deadline := time.After(r.patience)
	for !delivered() {
		select {
		case <-deadline:
			t.Fatalf("M1 was not answered within %s; the inbox lock is held: %v. "+
				"(Deliver holds the inbox lock while control.deliver answers the query with statusText -> runview.Status -> inbox.List, "+
				"which takes the same lock: the run deadlocks, and apodex say/messages/status/cancel of other processes hang on the lock.)",
				r.patience, ivInboxLocked(t, r.dir))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if code, _, errOut := ivWithin(t, 5*time.Second, func() (int, string, string) { return r.cli("messages", r.id) }); code != 0 {
		t.Fatalf("apodex messages after the answer: exit %d %s", code, errOut)
	}
	mev := ivMessageEvents(r.events())
	if len(mev) != 1 || mev[0].Class != string(inbox.ClassProgressQuery) || !strings.Contains(mev[0].Answer, "run "+r.id) {
		t.Errorf("message events %+v, want M1 answered by the runtime from the board", mev)
	}
	for _, rq := range r.g.all() {
		if strings.Contains(rq.Raw, "How is it going") {
			t.Errorf("request %d (%s) carries the progress query", rq.N, rq.Agent)
		}
	}
}

// A progress question does not disturb a lead blocked in wait: the runtime
// answers it, so waking the lead ("a user message arrived; it is in your
// next turn") would cost a model call and tell the lead something false.
func TestProgressQueryLeavesWaitingLeadAlone(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"})
	r.patience = 5 * time.Second
	r.leadWaiting()
	reqs := r.g.count()
	if code, out, _ := r.cli("say", r.id, "How is it going?"); code != 0 || out != "M1\n" {
		t.Fatalf("say: exit %d %q", code, out)
	}
	quiet := time.After(ivQuiet) // the window in which a woken lead calls the model
	for waiting := true; waiting; {
		select {
		case <-quiet:
			waiting = false
		case <-time.After(10 * time.Millisecond):
			if r.g.count() != reqs {
				rq := r.g.all()[reqs]
				t.Fatalf("a progress query woke the lead: its wait returned %q and it made request %d (%d user messages in it)",
					ivLastWaitResult(r.events()), rq.N, len(ivUserMessages(rq)))
			}
		}
	}
}

// A message sent while the lead's model call is in flight must reach the
// lead before its next model call even when that call's answer is wait:
// the wait returns at once (R-MSG-3). Here the run's control watcher reads
// the inbox (it applies a budget change sent after the message) before the
// lead starts waiting.
func TestMessageSentDuringLeadCallEndsItsNextWait(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub", "lead"})
	r.patience = 5 * time.Second
	r.g.release(r.held("lead")) // board_add + dispatch
	call := r.next("lead", 1)   // answered with wait once released
	if call.held == nil {
		t.Fatalf("the lead's second request was not held")
	}
	r.held("sub")
	if code, out, _ := r.cli("say", r.id, "Use the 2023 figures."); code != 0 || out != "M1\n" {
		t.Fatalf("say: exit %d %q", code, out)
	}
	if code, _, errOut := r.cli("say", r.id, "--budget", "turns=+10"); code != 0 {
		t.Fatalf("say --budget: exit %d %s", code, errOut)
	}
	r.waitFor("the budget change applied while every agent is in a model call", func() bool {
		return slices.Contains(ivControls(r.events()), "budget")
	})
	r.g.setHold("lead", false)
	r.g.release(call)
	var got *ivReq
	deadline := time.After(r.patience)
	for got == nil {
		for _, rq := range r.g.all()[call.N+1:] {
			if rq.Agent == "lead" {
				got = rq
			}
		}
		select {
		case <-deadline:
			t.Fatalf("M1 (sent during the lead's model call) was not delivered: the lead is blocked in wait %s after the call returned, M1 still %v. "+
				"(wait's Wake is Inbox.Notify, which only reports changes after the inbox's last read; the control watcher's read consumed M1's change.)",
				r.patience, ivState(r.dir, "M1"))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if um := ivUserMessages(got); len(um) != 1 || !strings.Contains(um[0], "Use the 2023 figures.") {
		t.Errorf("the lead's next request carries %q", um)
	}
}

// ivState is message id's state, read from the files without the lock.
func ivState(dir, id string) string {
	b, _ := os.ReadFile(filepath.Join(dir, inbox.StateFile))
	if strings.Contains(string(b), `"op":"delivered","id":"`+id+`"`) {
		return "delivered"
	}
	return "not delivered"
}

// ivInboxLocked reports whether someone holds the run's inbox lock now.
func ivInboxLocked(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, inbox.LockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// ivWithin runs a CLI command that must answer within d (a hung command
// fails the test; its goroutine is left behind).
func ivWithin(t *testing.T, d time.Duration, f func() (int, string, string)) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	ch := make(chan result, 1)
	go func() { c, o, e := f(); ch <- result{c, o, e} }()
	select {
	case r := <-ch:
		return r.code, r.out, r.err
	case <-time.After(d):
		t.Fatalf("the command did not answer within %s", d)
	}
	return 0, "", ""
}

func ivLastWaitResult(evs []record.Event) string {
	out := ""
	for _, e := range evs {
		var res record.ToolResult
		if e.Type == record.TypeToolResult && e.Agent == "lead" && e.Decode(&res) == nil && res.Name == "wait" {
			out = res.Output
		}
	}
	return out
}

// Messages to a run that does not exist are a usage error (exit 2), to one
// that has finished refused with exit 1; each with a one-line reason, and
// nothing is queued.
func TestSayToMissingOrFinishedRun(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{
		{"say", "nosuchrun", "hello"}, {"say", "nosuchrun", "--withdraw", "M1"}, {"say", "nosuchrun", "--budget", "turns=9"},
		{"pause", "nosuchrun"}, {"resume", "nosuchrun"}, {"cancel", "nosuchrun"}, {"messages", "nosuchrun"}, {"status", "nosuchrun"},
	} {
		code, out, errOut := cli(t, append([]string{args[0], "--home", home}, args[1:]...)...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
		oneLineMessage(t, errOut, "no such run", "nosuchrun", "apodex runs")
	}

	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "objective")...)
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, errOut)
	}
	s := decodeSummary(t, out)
	for _, args := range [][]string{{"say", s.RunID, "hello"}, {"say", s.RunID, "--update", "M1", "x"}, {"resume", s.RunID}} {
		code, out, errOut := cli(t, append([]string{args[0], "--home", home}, args[1:]...)...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
		oneLineMessage(t, errOut, "has finished", s.RunID, "completed")
	}
	if ms, err := inbox.List(s.RunDir); err != nil || len(ms) != 0 {
		t.Errorf("messages queued for a finished run: %+v %v", ms, err)
	}
}

// A flood of 1,000 messages from two senders at once, into a live run
// that keeps delivering while they send: all kept, ids unique and gapless,
// each livecmd.Sender's in its own order, all delivered in id order, none twice.
// One livecmd.Sender is `apodex say`, the other a program using the inbox package
// (as the HTTP API does).
func TestFloodFromTwoSenders(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait), ivSub, []string{"sub"},
		"--max-turns", "5000", "--max-tool-calls", "5000", "--context-window", "100000000")
	sub := r.leadWaiting()
	const each = 500
	start := time.Now()
	// The lead delivers in batches while the senders go on: the gate holds
	// each lead call until another hundred messages were sent. (Delivering
	// on every wake makes each call carry a longer history: slow, not harder.)
	var sent atomic.Int64
	r.g.setHold("lead", true)
	stopPacer, pacerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pacerDone)
		for next := int64(100); ; {
			select {
			case <-stopPacer:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if rq := r.g.heldOf("lead"); rq != nil && sent.Load() >= next {
				r.g.release(rq)
				next += 100
			}
		}
	}()
	ids := [2][]string{}
	texts := map[string]string{} // id -> text
	var mu sync.Mutex
	var wg sync.WaitGroup
	send := [2]func(text string) (string, error){
		func(text string) (string, error) {
			var out, errOut bytes.Buffer
			if code := Run(context.Background(), []string{"say", "--home", r.home, r.id, text}, &out, &errOut); code != 0 {
				return "", fmt.Errorf("exit %d: %s", code, errOut.String())
			}
			return strings.TrimSuffix(out.String(), "\n"), nil
		},
		func(text string) (string, error) { return inbox.Send(r.dir, "api", text) },
	}
	for s := range 2 {
		wg.Go(func() {
			for i := range each {
				text := fmt.Sprintf("flood %c-%03d: double-check the second source", 'A'+s, i)
				id, err := send[s](text)
				if err != nil {
					t.Errorf("sender %d message %d: %v", s, i, err)
					return
				}
				mu.Lock()
				ids[s] = append(ids[s], id)
				if _, dup := texts[id]; dup {
					t.Errorf("id %s given twice", id)
				}
				texts[id] = text
				mu.Unlock()
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	close(stopPacer)
	<-pacerDone
	r.g.setHold("lead", false)
	r.g.release(r.g.heldOf("lead"))
	t.Logf("senders took %s", time.Since(start))
	if t.Failed() {
		return
	}
	for s := range 2 {
		for i := 1; i < len(ids[s]); i++ {
			if idNum(ids[s][i]) <= idNum(ids[s][i-1]) {
				t.Errorf("sender %d got %s after %s", s, ids[s][i], ids[s][i-1])
			}
		}
	}
	for n := 1; n <= 2*each; n++ {
		if _, ok := texts[fmt.Sprintf("M%d", n)]; !ok {
			t.Fatalf("no message M%d: ids are not gapless", n)
		}
	}

	// Whatever the lead's wakes delivered so far, its subagent's report makes
	// it call the model again, with every message delivered, and finish.
	r.g.setHold("sub", false)
	r.g.release(sub)
	if code, s := r.finish(); code != 0 || s.Termination != "completed" {
		t.Fatalf("exit %d, termination %q: %s", code, s.Termination, s.Error)
	}
	var final *ivReq
	batches := 0 // lead calls that brought new messages before the flood was over
	for _, rq := range r.g.all() {
		if rq.Agent == "lead" {
			if n := len(ivUserMessages(rq)); n > 0 && n < 2*each && (final == nil || n > len(ivUserMessages(final))) {
				batches++
			}
			final = rq
		}
	}
	if batches < 2 {
		t.Errorf("only %d deliveries happened while the senders were sending; the test wants several", batches)
	}
	um := ivUserMessages(final)
	if len(um) != 2*each {
		t.Errorf("the lead's history holds %d user messages, want %d", len(um), 2*each)
	}
	for i, c := range um {
		id := fmt.Sprintf("M%d", i+1)
		if !strings.HasPrefix(c, "[user message "+id+" · ") || !strings.HasSuffix(c, "\n"+texts[id]) {
			t.Fatalf("user message %d of the lead's history is %q, want %s: %q", i+1, c, id, texts[id])
		}
	}

	ms := r.messages()
	mev := ivMessageEvents(r.events())
	if len(ms) != 2*each || len(mev) != 2*each {
		t.Fatalf("%d messages listed, %d message events; want %d of each", len(ms), len(mev), 2*each)
	}
	for i, m := range ms {
		e := mev[i]
		id := fmt.Sprintf("M%d", i+1)
		if m.ID != id || m.State != inbox.StateDelivered || m.Text != texts[id] || e.ID != id || e.Text != texts[id] || m.Seq != e.Seq {
			t.Fatalf("message %d: listed %+v, recorded %+v", i+1, m, e)
		}
		if i > 0 && e.Seq <= mev[i-1].Seq {
			t.Errorf("%s recorded at seq %d, before %s at %d", id, e.Seq, mev[i-1].ID, mev[i-1].Seq)
		}
	}
}

func idNum(id string) int {
	var n int
	fmt.Sscanf(id, "M%d", &n)
	return n
}

// A budget change sent with `say --budget` is applied to the live run and
// recorded as a control event, also when it arrives during the last turn
// the old budget allowed (which is exactly when a user raises it).
func TestBudgetChangeAppliedAndRecorded(t *testing.T) {
	view := func(int, llmtest.Request) llmtest.Turn { return calls(call("board_view", map[string]any{})) }
	// raise runs a lead allowed maxTurns, raises it by 5 while the lead
	// waits (after offset), and returns what went wrong, if anything.
	raise := func(t *testing.T, maxTurns int, offset time.Duration) string {
		r := ivStart(t, ivLead(view, ivDispatch, ivWait), ivSub, []string{"sub"}, "--max-turns", fmt.Sprint(maxTurns))
		sub := r.leadWaiting()
		time.Sleep(offset)
		code, out, errOut := r.cli("say", r.id, "--budget", "turns=+5")
		if code != 0 || !strings.Contains(out, "turns=+5") || !strings.Contains(out, fmt.Sprintf("now turns %d", maxTurns+5)) {
			t.Fatalf("say --budget: exit %d %q %s", code, out, errOut)
		}
		// A control does not wake a waiting lead; the subagent's report does.
		r.g.setHold("sub", false)
		r.g.release(sub)
		code, s := r.finish()
		var ctl []map[string]any
		for _, e := range runtest.Events(t, r.dir) {
			if e.Type == record.TypeControl {
				var c map[string]any
				e.Decode(&c)
				ctl = append(ctl, c)
			}
		}
		var bad []string
		leadTurns := 0 // the turn budget is the lead's; the summary counts every agent
		for _, e := range runtest.Events(t, r.dir) {
			if e.Type == record.TypeModelResponse && e.Agent == "lead" {
				leadTurns++
			}
		}
		if want := maxTurns + 5; code != 1 || s.Termination != "budget_turns" || leadTurns != want {
			bad = append(bad, fmt.Sprintf("exit %d, %s after %d lead turns, want budget_turns after %d", code, s.Termination, leadTurns, want))
		}
		if len(ctl) != 1 || ctl[0]["kind"] != "budget" || fmt.Sprint(ctl[0]["args"]) != "map[turns:+5]" || !strings.Contains(fmt.Sprint(ctl[0]["result"]), "turns=+5") {
			bad = append(bad, fmt.Sprintf("control events %v, want one budget turns=+5 applied", ctl))
		}
		return strings.Join(bad, "; ")
	}
	t.Run("with turns to spare", func(t *testing.T) {
		if bad := raise(t, 3, 0); bad != "" {
			t.Error(bad)
		}
	})
	// The lead is woken by the inbox's poll and the run's control watcher
	// applies the change on its own poll: the raise is sent at ten offsets
	// across one 50 ms poll period, so every order of the two is tried.
	t.Run("during the last turn", func(t *testing.T) {
		var lost []string
		for off := time.Duration(0); off < 50*time.Millisecond; off += 5 * time.Millisecond {
			if bad := raise(t, 2, off); bad != "" {
				lost = append(lost, fmt.Sprintf("sent %s into the wait: %s", off, bad))
			}
		}
		if len(lost) > 0 {
			t.Errorf("a budget raise sent during the last turn was lost in %d of 10 tries "+
				"(the lead's loop checks the turn budget before any code applies the pending control; "+
				"control.adjust does not apply controls, only the watcher and BeforeCall do):\n%s", len(lost), strings.Join(lost, "\n"))
		}
	})
}

// Runtime observations (a subagent's report) never travel or get recorded
// as user messages, and user messages never as observations (R-CONTRACT-4).
func TestObservationsAndMessagesStayApart(t *testing.T) {
	r := ivStart(t, ivLead(nil, ivDispatch, ivWait, ivView), ivSub, []string{"sub"})
	sub := r.leadWaiting()
	r.g.setHold("lead", true)
	text := "Mention USERTEXT in the summary."
	if code, _, _ := r.cli("say", r.id, text); code != 0 {
		t.Fatal("say failed")
	}
	leadReq := r.held("lead")
	// The subagent reports while the lead is busy: its notice waits for the
	// lead's next call, where it must arrive as a runtime observation.
	r.g.setHold("sub", false)
	r.g.release(sub)
	r.waitFor("A1 to report", func() bool {
		for _, e := range r.events() {
			var a struct{ Assignment, State string }
			if e.Type == "assignment" && e.Decode(&a) == nil && a.Assignment == "A1" && a.State == "reported" {
				return true
			}
		}
		return false
	})
	before := r.g.count()
	r.g.setHold("lead", false)
	r.g.release(leadReq)
	req := r.next("lead", before)
	var obs []string
	for _, m := range req.Msgs {
		if strings.Contains(m.Content, ivSubReport) && m.Role != "assistant" {
			obs = append(obs, m.Content)
		}
	}
	if len(obs) != 1 || !strings.HasPrefix(obs[0], "[runtime observation]") {
		t.Errorf("the report reached the lead as %q, want one runtime observation", obs)
	}
	if um := ivUserMessages(req); len(um) != 1 || !strings.Contains(um[0], text) || strings.Contains(um[0], ivSubReport) {
		t.Errorf("user messages in the lead's request: %q", um)
	}

	code, s := r.finish()
	if code != 0 || s.Termination != "completed" {
		t.Errorf("exit %d, termination %q: %s", code, s.Termination, s.Error)
	}
	evs := runtest.Events(t, r.dir)
	sawReport := false
	for _, e := range evs {
		switch e.Type {
		case record.TypeObservation:
			if strings.Contains(string(e.Raw), "USERTEXT") {
				t.Errorf("a user message was recorded as an observation: %s", e.Raw)
			}
			sawReport = sawReport || strings.Contains(string(e.Raw), ivSubReport)
		case record.TypeMessage:
			var m ivMessageEvent
			e.Decode(&m)
			if m.ID != "M1" || m.Text != text || strings.Contains(string(e.Raw), ivSubReport) {
				t.Errorf("message event %s is not the user's message", e.Raw)
			}
		}
	}
	if !sawReport {
		t.Errorf("the report was not recorded as an observation event")
	}
	if n := len(ivMessageEvents(evs)); n != 1 {
		t.Errorf("%d message events, want 1", n)
	}
}
