// Package serve is `apodex mcp serve`: Apodex as an MCP server another
// agent (Codex CLI, Claude Code, …) delegates long, verifiable jobs to,
// with the tools start_run, run_status, send_message, wait_run and
// run_outputs. Each run it starts is a process of its own (`apodex mcp
// run-detached`, in a session of its own) with the settings of apodex run's
// flags given to serve and the configuration: it goes on when the client
// disconnects and when the server exits or is killed, and stops as any run
// does (apodex cancel; a signal to it halts it resumable). Over HTTP it
// serves only a loopback address, and every request must carry the bearer
// token.
package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/mcp"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/version"
)

// New is a server whose runs get the settings of base (apodex run's
// flags as given, the configuration applied) and profile's MCP servers,
// and are kept under home; args are serve's run flags as given (without
// its own), which each run's process gets.
func New(base runflags.Flags, given map[string]bool, profile, home string, args []string) *Server {
	return &Server{base: base, given: given, profile: profile, home: home, args: args}
}

// Serve serves the tools over stdio when addr is "", else over
// streamable HTTP on the loopback address addr, every request carrying
// the bearer token (generated and printed on stderr when ""), until ctx
// ends. The runs it started go on in their own processes.
func (sv *Server) Serve(ctx context.Context, addr, token string, stdout, stderr io.Writer) error {
	if addr == "" {
		if token != "" {
			return cmdline.Usagef("--token goes with --http")
		}
		return mcp.ServeStdio(ctx, "apodex", version.Runtime, sv.tools(), os.Stdin, nopWriteCloser{termtext.Raw(stdout)})
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return cmdline.Usagef("--http %q: give a loopback address like 127.0.0.1:7778 (Apodex's runs are not served beyond this machine)", addr)
	}
	if token == "" {
		token = newToken()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("apodex mcp serve: %w", err)
	}
	srv := &http.Server{Handler: mcp.Handler("apodex", version.Runtime, sv.tools(), token), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "apodex: MCP server on http://%s/ (streamable HTTP); send Authorization: Bearer %s\n", ln.Addr(), token)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newToken() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Server starts and reads runs for MCP clients.
type Server struct {
	base    runflags.Flags
	given   map[string]bool
	profile string
	home    string
	args    []string // serve's run flags, as given: each run's process gets them
}

// StartArgs is a start_run request.
type StartArgs struct {
	Objective    string `json:"objective,omitempty" desc:"What the agent should do (or give task)."`
	Task         string `json:"task,omitempty" desc:"A task file (task.yaml) on this machine: objective, inputs, budget, deliverables and how they are verified."`
	Inputs       string `json:"inputs,omitempty" desc:"A directory on this machine the agent sees read-only at /inputs (overrides the task's)."`
	Mode         string `json:"mode,omitempty" desc:"react (one agent, the default) or team (a lead that plans and dispatches subagents)."`
	MaxTurns     int    `json:"max_turns,omitempty" desc:"Model calls allowed."`
	MaxToolCalls int    `json:"max_tool_calls,omitempty" desc:"Tool calls allowed."`
	MaxTokens    int    `json:"max_tokens,omitempty" desc:"Tokens allowed (prompt + completion)."`
	Timeout      string `json:"timeout,omitempty" desc:"Hard time limit, e.g. 15m."`
}

type runArgs struct {
	RunID string `json:"run_id" desc:"The run's id (as start_run returned it; a unique prefix or latest works)."`
}

type messageArgs struct {
	RunID string `json:"run_id" desc:"The run's id."`
	Text  string `json:"text" desc:"The message: a clarification, a correction, a new priority; it reaches the run's coordinator before its next model call."`
}

type waitArgs struct {
	RunID    string `json:"run_id" desc:"The run's id."`
	TimeoutS int    `json:"timeout_s,omitempty" desc:"How long to wait, in seconds (default 600, at most 3600); the run goes on after."`
}

type outputsArgs struct {
	RunID string `json:"run_id" desc:"The run's id."`
	Path  string `json:"path,omitempty" desc:"A file to read, under /outputs or /workspace (e.g. /outputs/report.md); without it, the delivery and verification."`
}

func (sv *Server) tools() []tool.Tool {
	const big = 1 << 20
	return []tool.Tool{
		tool.Define("start_run", "Start an Apodex run: an agent (or an Agent Team) works on an objective or a task file in a sandbox, delivers files under /outputs and has them verified. Returns its run id at once; the run goes on by itself (wait_run follows it).", 0, sv.start),
		tool.Define("run_status", "A run's progress: status, turns, tool calls, tokens, the last steps, messages; and a team run's task board.", big, sv.status),
		tool.Define("send_message", "Send a message to a live run (as apodex say): it reaches the coordinator before its next model call; a message that changes the requested outcome starts a new contract.", 0, sv.message),
		tool.Define("wait_run", "Wait for a run to finish, with a progress notification per step; returns its outcome (status, termination, summary, delivery, verification). On a timeout it says the run is still going; waiting again is fine.", big, sv.waitRun),
		tool.Define("run_outputs", "A run's delivered files and verification results, or the content of one file of it (path under /outputs or /workspace).", big, sv.outputs),
	}
}

// RunConfig is the run a start_run request asks for, under id: serve's
// settings with the request's on top.
func (sv *Server) RunConfig(a StartArgs, id string) (run.Config, error) {
	f := sv.base
	given := maps.Clone(sv.given)
	set := func(flag string) { given[flag] = true }
	if a.Mode != "" {
		f.Settings.Mode = a.Mode
		set("mode")
	}
	if a.MaxTurns > 0 {
		f.Settings.Budget.MaxTurns = a.MaxTurns
		set("max-turns")
	}
	if a.MaxToolCalls > 0 {
		f.Settings.Budget.MaxToolCalls = a.MaxToolCalls
		set("max-tool-calls")
	}
	if a.MaxTokens > 0 {
		f.Settings.Budget.MaxTokens = a.MaxTokens
		set("max-tokens")
	}
	if a.Timeout != "" {
		d, err := time.ParseDuration(a.Timeout)
		if err != nil || d < 0 {
			return run.Config{}, fmt.Errorf("timeout %q: use a duration like 15m or 90s", a.Timeout)
		}
		f.Settings.Timeout = record.Duration(d)
		set("timeout")
	}
	var c *contract.Contract
	switch {
	case a.Task != "":
		var err error
		if c, err = contract.Load(a.Task); err != nil {
			return run.Config{}, fmt.Errorf("the task file is not valid: %v", err)
		}
		if a.Objective != "" {
			return run.Config{}, fmt.Errorf("the task %s has its own objective: give task or objective, not both", a.Task)
		}
		f.ApplyContract(given, c)
	case strings.TrimSpace(a.Objective) == "":
		return run.Config{}, errors.New("give objective (what the agent should do) or task (a task.yaml path)")
	}
	if a.Inputs != "" {
		f.Inputs = a.Inputs
	}
	if err := f.Check(); err != nil {
		return run.Config{}, err
	}
	var named []string
	if c != nil {
		named = c.MCP
	}
	servers, err := runflags.RunMCP(f, sv.profile, named)
	if err != nil {
		return run.Config{}, err
	}
	model, info, err := f.Model.Build()
	if err != nil {
		return run.Config{}, err
	}
	return run.Config{Settings: f.Settings, Home: sv.home, Objective: strings.TrimSpace(a.Objective), Contract: c, InputsDir: f.Inputs, CorpusDir: f.Corpus,
		Model: model, ModelInfo: info, NewID: func() string { return id }, MCP: servers}, nil
}

// DetachedRun is what `apodex mcp run-detached` reads on its standard
// input: the run's id and the start_run request.
type DetachedRun struct {
	ID   string    `json:"id"`
	Args StartArgs `json:"args"`
}

// start checks the request, starts the run in a process of its own (so
// it outlives this server) and returns its id once its record exists.
func (sv *Server) start(_ context.Context, a StartArgs) tool.Result {
	id := run.NewID(time.Now())
	if _, err := sv.RunConfig(a, id); err != nil {
		return tool.Errorf("%v", err)
	}
	dir := filepath.Join(sv.home, "runs", id)
	logf, err := os.CreateTemp("", "apodex-mcp-run-*.log")
	if err != nil {
		return tool.Errorf("the run did not start: %v", err)
	}
	defer logf.Close()
	req, _ := json.Marshal(DetachedRun{ID: id, Args: a})
	exe, err := os.Executable()
	if err != nil {
		return tool.Errorf("the run did not start: %v", err)
	}
	cmd := exec.Command(exe, append([]string{"mcp", "run-detached"}, sv.args...)...)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(req), logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // not in this server's session: its end, a signal to its group, a closed terminal do not reach it
	if err := cmd.Start(); err != nil {
		os.Remove(logf.Name())
		return tool.Errorf("the run did not start: %v", err)
	}
	// Its standard error says why it did not start, if it did not; once
	// it started, the file is removed (the record says the rest).
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaped here while this server lives; by init after
	for {
		if _, err := record.First(dir); err == nil {
			break
		}
		select {
		case err := <-exited:
			if _, ferr := record.First(dir); ferr == nil {
				break
			}
			msg, _ := os.ReadFile(logf.Name())
			os.Remove(logf.Name())
			why := strings.TrimPrefix(strings.TrimSpace(string(msg)), "apodex: ")
			if why == "" {
				why = fmt.Sprint(err)
			}
			return tool.Errorf("the run did not start: %s", why)
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	os.Remove(logf.Name()) // the run started: its record says the rest
	return jsonResult(map[string]string{"run_id": id, "run_dir": dir, "status": "running",
		"next": "wait_run follows it to the end (with progress); run_status shows where it is; send_message steers it"})
}

func (sv *Server) dir(id string) (string, tool.Result, bool) {
	dir, err := cmdline.FindRun(sv.home, id)
	if err != nil {
		return "", tool.Errorf("%v", err), false
	}
	return dir, tool.Result{}, true
}

func (sv *Server) status(_ context.Context, a runArgs) tool.Result {
	dir, bad, ok := sv.dir(a.RunID)
	if !ok {
		return bad
	}
	text := runview.StatusText(dir)
	w := runview.BoardWatcher{Dir: dir}
	if v, err := w.Read(); err == nil {
		if head, body := v.Text(); strings.TrimSpace(body) != "" {
			text += "\n" + head + body
		}
	}
	return tool.Result{Output: text}
}

func (sv *Server) message(_ context.Context, a messageArgs) tool.Result {
	dir, bad, ok := sv.dir(a.RunID)
	if !ok {
		return bad
	}
	id, err := inbox.Send(dir, "mcp client", a.Text)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	return tool.Result{Output: fmt.Sprintf("queued as %s: it reaches the run's coordinator before its next model call", id)}
}

func (sv *Server) waitRun(ctx context.Context, a waitArgs) tool.Result {
	dir, bad, ok := sv.dir(a.RunID)
	if !ok {
		return bad
	}
	wait := time.Duration(a.TimeoutS) * time.Second
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, min(wait, time.Hour))
	defer cancel()
	steps := 0
	lines := &progressLines{send: func(line string) {
		steps++
		mcp.Progress(ctx, line, float64(steps), 0)
	}}
	pr := progress.New(lines, progress.Options{})
	for e, err := range record.Follow(ctx, dir, 0) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return tool.Errorf("reading the run's record: %v", err)
		}
		pr.Event(e)
		if _, done := record.As[record.RunFinished](e); done {
			return sv.outcome(dir)
		}
	}
	if runview.Liveness(dir) == runview.Finished {
		return sv.outcome(dir)
	}
	return tool.Result{Output: fmt.Sprintf("run %s is still going after %s: %s\ncall wait_run again to keep waiting", filepath.Base(dir), wait, runview.StatusText(dir))}
}

// progressLines turns the progress printer's lines into notifications.
type progressLines struct {
	send func(string)
	buf  []byte
}

func (p *progressLines) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := strings.TrimSpace(string(p.buf[:i])); line != "" {
			p.send(line)
		}
		p.buf = p.buf[i+1:]
	}
}

// outcome is a finished run's result for the client.
func (sv *Server) outcome(dir string) tool.Result {
	info, err := runview.Load(dir)
	if err != nil {
		return tool.Errorf("run %s cannot be read: %v", filepath.Base(dir), err)
	}
	return jsonResult(struct {
		RunID        string              `json:"run_id"`
		RunDir       string              `json:"run_dir"`
		Status       string              `json:"status"`
		Termination  string              `json:"termination_reason,omitempty"`
		Summary      string              `json:"summary,omitempty"`
		Error        string              `json:"error,omitempty"`
		Failures     []string            `json:"failures,omitempty"`
		Delivery     *record.Delivery    `json:"delivery,omitempty"`
		Verification []runview.CheckInfo `json:"verification,omitempty"`
		Usage        any                 `json:"usage"`
		Files        []record.FileEntry  `json:"files,omitempty"`
	}{info.RunID, dir, info.Status, info.Termination, info.Summary, info.Error, info.Failures, info.Delivery, info.Verification, info.Usage, clipFiles(info.Files)})
}

func clipFiles(fs []record.FileEntry) []record.FileEntry {
	if len(fs) > 200 {
		return fs[:200]
	}
	return fs
}

func (sv *Server) outputs(_ context.Context, a outputsArgs) tool.Result {
	dir, bad, ok := sv.dir(a.RunID)
	if !ok {
		return bad
	}
	if a.Path == "" {
		if runview.Liveness(dir) != runview.Finished {
			return tool.Errorf("run %s has not finished: wait_run first (run_outputs with a path reads a file now)", filepath.Base(dir))
		}
		return sv.outcome(dir)
	}
	p := strings.TrimPrefix(a.Path, "/")
	plane, rel, _ := strings.Cut(p, "/")
	if (plane != "outputs" && plane != "workspace") || rel == "" {
		return tool.Errorf("path %q: give a file under /outputs or /workspace, e.g. /outputs/report.md", a.Path)
	}
	f, err := runfiles.OpenFile(dir, plane+"/"+rel) // a world rollout's untouched file is its world's
	if err != nil {
		return tool.Errorf("%s: %v", a.Path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 1<<20 {
		return tool.Errorf("%s: %d bytes, over the 1 MiB read here; it is at %s", a.Path, st.Size(), f.Name())
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return tool.Errorf("%s: %v", a.Path, err)
	}
	if !utf8.Valid(data) {
		return tool.Result{Output: fmt.Sprintf("%s is binary, %d bytes; it is at %s", a.Path, len(data), f.Name())}
	}
	return tool.Result{Output: string(data)}
}

func jsonResult(v any) tool.Result {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return tool.Errorf("%v", err)
	}
	return tool.Result{Output: string(b)}
}
