package run_test

import (
	"context"
	"github.com/apodex/apodex/internal/runtest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/verify/claim"
)

// roleOf is the caller role a request was sent with.
func roleOf(req llmtest.Request) string { return req.Header.Get(llm.HeaderRole) }

func offered(req llmtest.Request) []string {
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// A lead's verify starts a verifier agent: its request offers bash and
// verdict, holds no lead history, its bash recomputation and its verdict
// are recorded, a refuted claim attached to an item is shown to the lead
// with the item id, and evidence that is a directory or missing is named
// as cut, never dropped silently.
func TestVerifierAgentEndToEnd(t *testing.T) {
	var mu sync.Mutex
	lead, verifier := 0, 0
	const secret = "LEAD-ONLY-CONTEXT-7731"
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch roleOf(req) {
		case llm.CallerSubagent:
			return calls(tc("report", `{"summary":"summed","claims":[{"text":"the total is 45","evidence":["/inputs/data.csv"]}]}`))
		case llm.CallerVerifier:
			verifier++
			if verifier == 1 {
				return calls(tc("bash", `{"command":"awk 'NR>1{s+=$1} END{print s}' /inputs/data.csv; touch /workspace/verifier-wrote-this 2>/dev/null && echo WROTE"}`))
			}
			return calls(tc("verdict", `{"verdict":"refuted","location":"/inputs/data.csv:2","repair":"the total is 42","checks":["awk sum of column n: 42"]}`))
		}
		lead++
		switch lead {
		case 1:
			return calls(tc("board_add", `{"title":"sum","objective":"sum the column; `+secret+`"}`),
				tc("dispatch", `{"item":"T1","role":"summer","instructions":"Sum it.","tools":["read_file"]}`))
		case 2:
			return calls(tc("wait", `{}`))
		case 3:
			return calls(tc("verify", `{"claim":"the total is 45","evidence":["/inputs/data.csv","/inputs/sub"]}`))
		default:
			return calls(tc("board_cancel", `{"id":"T1","reason":"refuted"}`), tc("finish", `{"summary":"done"}`))
		}
	})
	cfg := config(t, "verify-run", nil)
	cfg.InputsDir = t.TempDir()
	put(t, filepath.Join(cfg.InputsDir, "data.csv"), "n\n40\n2\n")
	put(t, filepath.Join(cfg.InputsDir, "sub", "a.txt"), "x")
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	runtest.NeedSandbox(t) // the planes are bound read-only for the verifier
	cfg.Mode, cfg.Sandbox = run.ModeTeam, runtest.SandboxKind()
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var vreqs []llmtest.Request
	for _, req := range srv.Requests() {
		if roleOf(req) == llm.CallerVerifier {
			vreqs = append(vreqs, req)
		}
	}
	if len(vreqs) != 2 {
		t.Fatalf("verifier requests = %d, want 2", len(vreqs))
	}
	if names := offered(vreqs[0]); !slices.Contains(names, "bash") || !slices.Contains(names, "verdict") || slices.Contains(names, "write_file") || slices.Contains(names, "board_add") {
		t.Errorf("verifier offered %v; want bash and verdict, no write or lead tools", names)
	}
	raw := string(vreqs[0].Raw)
	if strings.Contains(raw, secret) {
		t.Errorf("the verifier's request holds the lead's history")
	}
	if !strings.Contains(raw, "40") || !strings.Contains(raw, "/inputs/sub/a.txt") {
		t.Errorf("the verifier's request lacks the expanded evidence or the directory listing")
	}
	if strings.Contains(string(vreqs[1].Raw), `42\nWROTE`) && s.Sandbox == "bwrap" {
		t.Errorf("the verifier's bash wrote to /workspace under bubblewrap")
	}
	if !strings.Contains(string(vreqs[1].Raw), "42") {
		t.Errorf("the verifier's second request lacks its bash recomputation")
	}

	events := runtest.Events(t, s.RunDir)
	var vs []claim.Verdict
	bash := false
	for _, e := range events {
		var tc record.ToolCall
		if e.Type == record.TypeToolCall && record.RuntimeVerifier(e.Agent) && e.Decode(&tc) == nil && tc.Name == "bash" {
			bash = true
		}
		if e.Type == record.TypeVerdict {
			var v claim.Verdict
			if err := e.Decode(&v); err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
	}
	if !bash {
		t.Error("the verifier's bash call is not on the record")
	}
	if len(vs) != 1 || vs[0].Verdict != claim.Refuted || vs[0].ClaimID != "K1" || vs[0].Item != "T1" || len(vs[0].Checks) != 1 {
		t.Fatalf("verdicts = %+v; want one refuted verdict on K1 of T1 with its checks", vs)
	}
	if len(vs[0].Cut) != 1 || !strings.Contains(vs[0].Cut[0], "/inputs/sub: a directory") {
		t.Errorf("cut = %q; want the directory named", vs[0].Cut)
	}
	// The lead read the verdict with the item id and what was cut.
	var out string
	for _, req := range srv.Requests() {
		if roleOf(req) == llm.CallerLead {
			for _, m := range req.Messages {
				if strings.HasPrefix(m.Content, "verdict:") {
					out = m.Content
				}
			}
		}
	}
	for _, want := range []string{"verdict: refuted", "board item T1", "board_reopen", "evidence cut: /inputs/sub: a directory"} {
		if !strings.Contains(out, want) {
			t.Errorf("the lead's verify result %q lacks %q", out, want)
		}
	}
}

// Evidence over the verifier's budget is cut at a line, and the cut says
// how much was given and where to read on.
func TestVerifierEvidenceTooLarge(t *testing.T) {
	var mu sync.Mutex
	lead := 0
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		if roleOf(req) == llm.CallerVerifier {
			return calls(tc("verdict", `{"verdict":"insufficient","checks":["read the head"]}`))
		}
		lead++
		if lead == 1 {
			return calls(tc("verify", `{"claim":"row 9999 is z","evidence":["/inputs/big.txt"]}`))
		}
		return calls(tc("finish", `{"summary":"done"}`))
	})
	cfg := config(t, "verify-big", nil)
	cfg.InputsDir = t.TempDir()
	put(t, filepath.Join(cfg.InputsDir, "big.txt"), strings.Repeat("abcdefghij\n", 10000))
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range runtest.Events(t, s.RunDir) {
		if e.Type == record.TypeVerdict {
			var v claim.Verdict
			e.Decode(&v)
			if len(v.Cut) != 1 || !strings.Contains(v.Cut[0], "of 110000 bytes") || !strings.Contains(v.Cut[0], "from line") {
				t.Errorf("cut = %q; want the bytes given of 110000 and the line to read on from", v.Cut)
			}
			return
		}
	}
	t.Error("no verdict recorded")
}
