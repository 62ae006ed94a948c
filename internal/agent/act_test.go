package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// writer is a tool that writes its "body" argument (raw bytes, base64 in
// JSON) to /workspace/<name> and reports the change.
func writer(fs *workspace.FS) fakeTool {
	return fakeTool{"put", func(_ context.Context, a json.RawMessage) tool.Result {
		var args struct {
			Name string `json:"name"`
			Body []byte `json:"body"`
		}
		if err := json.Unmarshal(a, &args); err != nil {
			return tool.Errorf("%v", err)
		}
		if err := os.WriteFile(filepath.Join(fs.Workspace, args.Name), args.Body, 0o644); err != nil {
			return tool.Errorf("%v", err)
		}
		return tool.Result{Output: "ok", Deltas: []tool.FileDelta{{Path: "/workspace/" + args.Name, After: "sha256:any", Bytes: int64(len(args.Body))}}}
	}}
}

func TestFileDeltaKeepsContent(t *testing.T) {
	fs := &workspace.FS{Inputs: t.TempDir(), Workspace: t.TempDir(), Outputs: t.TempDir()}
	files := []struct {
		name   string
		body   []byte
		inline bool
	}{
		{"small.txt", []byte("alpha\n\"quoted\" <b> é 😀\n"), true},
		{"limit.txt", []byte(strings.Repeat("x", inline)), true},
		{"large.txt", []byte(strings.Repeat("x", inline+1)), false},
		{"binary.bin", []byte{0xff, 0xfe, 0, 1}, false},
		{"empty.txt", nil, false},
	}
	var calls []llm.ToolCall
	for _, f := range files {
		args, _ := json.Marshal(map[string]any{"name": f.name, "body": f.body})
		calls = append(calls, call("put", string(args)))
	}
	cfg, dir := newConfig(t, turns(calls, []llm.ToolCall{finishCall()}), writer(fs))
	cfg.FS = fs
	if out := Run(context.Background(), cfg, "write"); out.Termination != Completed {
		t.Fatalf("%s %v", out.Termination, out.Err)
	}
	deltas := map[string]record.FileDelta{}
	for _, e := range events(t, dir, record.TypeFileDelta) {
		var d record.FileDelta
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		deltas[d.Path] = d
	}
	for _, f := range files {
		d := deltas["/workspace/"+f.name]
		if f.inline {
			if d.Content != string(f.body) || d.ContentRef != "" {
				t.Errorf("%s: content %.20q ref %q, want the content inline", f.name, d.Content, d.ContentRef)
			}
			continue
		}
		if d.Content != "" {
			t.Errorf("%s: content inline, want a blob", f.name)
		}
		p, err := record.BlobPath(dir, d.ContentRef)
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			continue
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != string(f.body) {
			t.Errorf("%s: blob %.20q %v", f.name, got, err)
		}
	}
}

// The tools_ref of every model_request names the tools that very request
// offered, also when two agents with different tool sets (one with the
// recall tool compaction adds) share a record.
func TestToolsRefFollowsTheToolSet(t *testing.T) {
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var mu sync.Mutex
	offered := map[string][][]string{} // by agent, per request
	agentCfg := func(id string, window int, tools ...tool.Tool) Config {
		inner := turns([]llm.ToolCall{call("echo", `{}`)}, []llm.ToolCall{call("echo", `{}`)}, []llm.ToolCall{finishCall()})
		model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			var names []string
			for _, s := range req.Tools {
				names = append(names, s.Name)
			}
			slices.Sort(names)
			mu.Lock()
			offered[id] = append(offered[id], names)
			mu.Unlock()
			return inner.Generate(ctx, req)
		})
		return Config{ID: id, Model: model, Tools: tool.NewSet(append(tools, tool.FinishTool{})...), Log: log,
			Retry: llm.RetryPolicy{MaxAttempts: 1}, Context: Context{Window: window}}
	}
	var wg sync.WaitGroup
	for _, cfg := range []Config{
		agentCfg("plain", 0, echo("echo")),
		agentCfg("compacting", 100000, echo("echo")),
		agentCfg("more", 0, echo("echo"), echo("other")),
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out := Run(context.Background(), cfg, "task"); out.Termination != Completed {
				t.Errorf("%s: %s %v", cfg.ID, out.Termination, out.Err)
			}
		}()
	}
	wg.Wait()
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}

	recorded := map[string][][]string{}
	for _, e := range events(t, dir, record.TypeModelRequest) {
		var mr record.ModelRequest
		if err := e.Decode(&mr); err != nil {
			t.Fatal(err)
		}
		p, err := record.BlobPath(dir, mr.ToolsRef)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var specs []llm.ToolSpec
		if err := json.Unmarshal(raw, &specs); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range specs {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		recorded[e.Agent] = append(recorded[e.Agent], names)
	}
	for id, want := range offered {
		if got := recorded[id]; !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: tools_ref names %v, the model was offered %v", id, got, want)
		}
	}
	if !slices.Contains(offered["compacting"][0], "recall") || slices.Contains(offered["plain"][0], "recall") {
		t.Errorf("the test needs recall in one set only: %v", offered)
	}
}
