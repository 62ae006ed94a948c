package team_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/team"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/workspace"
)

// testDeadline bounds every team run of these tests: a run that would block
// forever (a lost notice, a deadlock) fails instead.
const testDeadline = 20 * time.Second

// harness is one team run in a temporary directory, assembled the way
// internal/run does it: a real record, real planes, the publication plane,
// the built-in tools and a lead loop with the team's gate and notices.
type harness struct {
	t      testing.TB
	dir    string
	fs     *workspace.FS
	log    *record.Log
	plane  *publish.Plane
	runner sandbox.Runner // nil when bubblewrap is unavailable

	// deadline bounds the run (default testDeadline).
	deadline time.Duration
	// leadTurns is the lead's turn budget (default 60).
	leadTurns int

	team   *team.Team
	out    agent.Outcome
	events []record.Event
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	fs := runtest.Planes(t, dir)
	log := runtest.Record(t, dir)
	plane, err := publish.New(publish.Config{Outputs: fs.Outputs, Staging: filepath.Join(dir, "staging")})
	if err != nil {
		t.Fatal(err)
	}
	plane.OnEvent = func(ev publish.LeaseEvent) { log.Append(record.TypeLease, ev.Agent, ev.Lease) }
	h := &harness{t: t, dir: dir, fs: fs, log: log, plane: plane, deadline: testDeadline, leadTurns: 60}
	if r, err := sandbox.New(sandbox.KindAuto); err == nil {
		h.runner = r
	}
	return h
}

// needSandbox skips a test whose meaning depends on bash in the sandbox.
func (h *harness) needSandbox() {
	h.t.Helper()
	if h.runner == nil {
		h.t.Skip("no bubblewrap sandbox")
	}
}

// seed writes a file under a plane before the run (planePath like
// "/workspace/x.txt").
func (h *harness) seed(planePath, content string) {
	h.t.Helper()
	host := h.host(planePath)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// host maps a plane path to the shared host file.
func (h *harness) host(planePath string) string {
	plane, rel, _ := strings.Cut(strings.TrimPrefix(planePath, "/"), "/")
	return filepath.Join(h.fs.Root(plane), filepath.FromSlash(rel))
}

// tools are agent id's built-in tools over fs, as internal/run's toolkit
// builds them: file tools and bash, claim_outputs and finish.
func (h *harness) tools(id string, fs *workspace.FS) []tool.Tool {
	view := fs.View(func(pp string, size int64) error { return h.plane.CheckWrite(id, pp, size) })
	env := builtin.Env{FS: view, Runner: h.runner, DefaultTimeout: 60 * time.Second, Outputs: h.plane.BashMounts(id)}
	return append(builtin.Tools(env), tool.Serial(publish.ClaimTool(h.plane, id)), tool.FinishTool{})
}

// config is the team's configuration before the test's edits.
func (h *harness) config(model llm.Model) team.Config {
	return team.Config{
		Model: model, Log: h.log, FS: h.fs,
		Tools:        func(id string, fs *workspace.FS) *tool.Set { return tool.NewSet(h.tools(id, fs)...) },
		Release:      func(id, reason string) { h.plane.Release(id, reason) },
		WorktreeRoot: filepath.Join(h.dir, "worktrees"),
		Concurrency:  4,
		Retry:        llm.RetryPolicy{MaxAttempts: 1},
	}
}

// run plays a whole team run: the lead's loop until it ends, then the
// team's shutdown; the record is closed and read back into h.events.
func (h *harness) run(model llm.Model, edit func(*team.Config)) agent.Outcome {
	h.t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), h.deadline, fmt.Errorf("the team run did not end within %s", h.deadline))
	defer cancel()
	cfg := h.config(model)
	if edit != nil {
		edit(&cfg)
	}
	h.team = team.New(ctx, cfg)
	lead := agent.Runtime{Model: model, Log: h.log, FS: h.fs, Retry: llm.RetryPolicy{MaxAttempts: 1}}.Assemble(agent.Spec{
		ID: "lead", Prompt: func(*tool.Set) string { return team.LeadPrompt },
		Tools: append(h.tools("lead", h.fs), h.team.LeadTools()...), Guard: h.team.Guard,
		Gate: h.team.Gate(ctx), BeforeCall: h.team.BeforeCall, Budget: agent.Budget{MaxTurns: h.leadTurns},
	})
	h.out = agent.Run(ctx, lead, "Do the objective with your team.")
	h.team.Shutdown(string(h.out.Termination))
	if ctx.Err() != nil {
		h.t.Errorf("%v", context.Cause(ctx))
	}
	if err := h.log.Close(); err != nil {
		h.t.Fatal(err)
	}
	c, err := record.Read(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	h.events = c.Events
	h.noMountsLeft()
	return h.out
}

// noMountsLeft asserts that no per-agent overlay is still mounted under
// the run directory.
func (h *harness) noMountsLeft() {
	h.t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], h.dir) {
			h.t.Errorf("still mounted after the run: %s", fields[4])
		}
	}
}

// --- scripted model helpers ---

// byAgent routes each request to the policy of the agent making it.
func byAgent(ps map[string]scripted.Policy) scripted.Policy {
	return func(turn int, req *llm.Request) (*llm.Response, error) {
		p, ok := ps[req.Agent]
		if !ok {
			p, ok = ps["*"]
		}
		if !ok {
			return nil, fmt.Errorf("test: no policy for agent %q", req.Agent)
		}
		return p(turn, req)
	}
}

// steps plays fixed replies, one per turn.
func steps(rs ...*llm.Response) scripted.Policy {
	return func(turn int, req *llm.Request) (*llm.Response, error) {
		if turn >= len(rs) {
			return nil, fmt.Errorf("test: %s asked for turn %d past its script", req.Agent, turn)
		}
		return rs[turn], nil
	}
}

func calls(cs ...llm.ToolCall) *llm.Response { return scripted.Calls(cs...) }

func call(name string, args map[string]any) llm.ToolCall { return scripted.Call(name, args) }

func add(title, objective string, deps ...string) llm.ToolCall {
	a := map[string]any{"title": title, "objective": objective}
	if len(deps) > 0 {
		a["deps"] = deps
	}
	return call("board_add", a)
}

func dispatch(item, role string, tools ...string) llm.ToolCall {
	a := map[string]any{"item": item, "role": role, "instructions": "Do " + item + " as the objective says, then report."}
	if len(tools) > 0 {
		a["tools"] = tools
	}
	return call("dispatch", a)
}

func wait(ids ...string) llm.ToolCall {
	a := map[string]any{"timeout_s": 15}
	if len(ids) > 0 {
		a["assignments"] = ids
	}
	return call("wait", a)
}

func resolve(id string, refs ...string) llm.ToolCall {
	a := map[string]any{"id": id, "note": "checked the report's evidence"}
	if len(refs) > 0 {
		a["refs"] = refs
	}
	return call("board_resolve", a)
}

func finish(summary string) llm.ToolCall {
	return call("finish", map[string]any{"summary": summary})
}

func writeFile(path, content string) llm.ToolCall {
	return call("write_file", map[string]any{"path": path, "content": content})
}

func readFile(path string) llm.ToolCall { return call("read_file", map[string]any{"path": path}) }

func bash(command string) llm.ToolCall { return call("bash", map[string]any{"command": command}) }

func report(summary string, artifacts ...string) llm.ToolCall {
	a := map[string]any{"summary": summary}
	if len(artifacts) > 0 {
		a["artifacts"] = artifacts
		a["claims"] = []map[string]any{{"text": summary, "evidence": artifacts}}
	}
	return call("report", a)
}

// seen reports whether any message of the request (after the system
// prompt) contains s: a tool result, a runtime observation, the task.
func seen(req *llm.Request, s string) bool {
	for _, m := range req.Messages[1:] {
		if m.Role != llm.RoleAssistant && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// called counts the calls of tool name the agent made so far.
func called(req *llm.Request, name string) int {
	n := 0
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			if c.Name == name {
				n++
			}
		}
	}
	return n
}

// --- record helpers ---

// assignmentEvent is an assignment event's payload as recorded.
type assignmentEvent struct {
	Seq        int64    `json:"seq"`
	Assignment string   `json:"assignment"`
	Item       string   `json:"item"`
	Role       string   `json:"role"`
	Tools      []string `json:"tools"`
	State      string   `json:"state"`
	Reason     string   `json:"reason"`
}

func decode[T any](t testing.TB, evs []record.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var v T
			if err := e.Decode(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// assignments returns the assignment events of id, in record order.
func (h *harness) assignments(id string) []assignmentEvent {
	var out []assignmentEvent
	for _, a := range decode[assignmentEvent](h.t, h.events, record.TypeAssignment) {
		if a.Assignment == id {
			out = append(out, a)
		}
	}
	return out
}

// states is the lifecycle of assignment id as recorded.
func (h *harness) states(id string) []string {
	var out []string
	for _, a := range h.assignments(id) {
		out = append(out, a.State)
	}
	return out
}

// lastState is the final recorded state of assignment id and its reason.
func (h *harness) lastState(id string) (string, string) {
	as := h.assignments(id)
	if len(as) == 0 {
		return "", ""
	}
	return as[len(as)-1].State, as[len(as)-1].Reason
}

// stateSeq is the seq of the event that put assignment id in state.
func (h *harness) stateSeq(id, state string) int64 {
	for _, a := range h.assignments(id) {
		if a.State == state {
			return a.Seq
		}
	}
	h.t.Errorf("assignment %s never was %s (lifecycle %v)", id, state, h.states(id))
	return -1
}

// boardEvents are the recorded board events with their record seqs.
func (h *harness) boardEvents() ([]board.Event, []int64) {
	var evs []board.Event
	var seqs []int64
	for _, e := range h.events {
		if e.Type != record.TypeBoard {
			continue
		}
		var be board.Event
		if err := e.Decode(&be); err != nil {
			h.t.Fatal(err)
		}
		evs = append(evs, be)
		seqs = append(seqs, e.Seq)
	}
	return evs, seqs
}

// boardAt folds the board events recorded before seq (all when seq ≤ 0).
func (h *harness) boardAt(seq int64) *board.Board {
	h.t.Helper()
	evs, seqs := h.boardEvents()
	n := len(evs)
	if seq > 0 {
		n = 0
		for n < len(seqs) && seqs[n] < seq {
			n++
		}
	}
	b := &board.Board{}
	for i, e := range evs[:n] {
		if err := b.Apply(int64(i+1), e); err != nil {
			h.t.Fatalf("the recorded board events do not fold: event %d: %v", i+1, err)
		}
	}
	return b
}

func (h *harness) item(b *board.Board, id string) board.Item {
	h.t.Helper()
	it, err := b.Get(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return it
}

// result is one tool result as recorded, with its record seq.
type result struct {
	Seq     int64  `json:"seq"`
	Agent   string `json:"agent"`
	Name    string `json:"name"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error"`
}

// results are the recorded results of tool name called by agent, in order.
func (h *harness) results(agentID, name string) []result {
	var out []result
	for _, e := range h.events {
		if e.Type != record.TypeToolResult || e.Agent != agentID {
			continue
		}
		var r result
		if err := e.Decode(&r); err != nil {
			h.t.Fatal(err)
		}
		if r.Name == name {
			r.Agent = e.Agent
			out = append(out, r)
		}
	}
	return out
}

// nth returns the i-th recorded result of tool name by agent, failing the
// test when there are fewer.
func (h *harness) nth(agentID, name string, i int) result {
	h.t.Helper()
	rs := h.results(agentID, name)
	if i >= len(rs) {
		h.t.Fatalf("%s made %d %s call(s); want at least %d", agentID, len(rs), name, i+1)
	}
	return rs[i]
}

// wantRefused asserts that r is an error naming every one of want.
func wantRefused(t testing.TB, what string, r result, want ...string) {
	t.Helper()
	if !r.IsError {
		t.Errorf("%s was not refused: %q", what, r.Output)
		return
	}
	for _, w := range want {
		if !strings.Contains(r.Output, w) {
			t.Errorf("%s refusal %q does not name %q", what, r.Output, w)
		}
	}
}

// wantOK asserts that r succeeded.
func wantOK(t testing.TB, what string, r result) {
	t.Helper()
	if r.IsError {
		t.Errorf("%s failed: %q", what, r.Output)
	}
}

func wantLifecycle(t testing.TB, h *harness, id string, want ...string) {
	t.Helper()
	if got := h.states(id); !slices.Equal(got, want) {
		t.Errorf("assignment %s lifecycle = %v; want %v", id, got, want)
	}
}

func readHost(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
	}
	return string(b)
}

// flags collects observations made inside model policies (which run on the
// subagents' goroutines) for the test to check afterwards.
type flags struct {
	mu sync.Mutex
	m  map[string]string
}

func (f *flags) set(k, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = v
}

func (f *flags) get(k string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[k]
}
