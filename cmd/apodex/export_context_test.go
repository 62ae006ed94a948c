package main

// Training data that matches what the model saw (issue 27): a run forced
// through tier-1 and tier-2 compaction exports samples whose every trained
// assistant turn follows exactly the messages of a request the endpoint
// received; ATIF of the same run validates against Harbor's model rules in
// both versions, as documents and as a Harbor trial directory.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/trajectory/atiftest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sampleMsg is a chat-export message as both flavours write it.
type sampleMsg struct {
	Role      string  `json:"role"`
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Weight     *int   `json:"weight"`
}

// wire renders what a provider is sent of a message, for comparison:
// role, content, tool calls (arguments as JSON text) and the answered id.
func (m sampleMsg) wire(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	content := ""
	if m.Content != nil {
		content = *m.Content
	}
	fmt.Fprintf(&b, "%s|%q|%s", m.Role, content, m.ToolCallID)
	for _, tc := range m.ToolCalls {
		args := string(tc.Function.Arguments)
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s
		}
		fmt.Fprintf(&b, "|%s %s %s", tc.ID, tc.Function.Name, args)
	}
	return b.String()
}

func wireOf(m llmtest.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%q|%s", m.Role, m.Content, m.ToolCallID)
	for _, tc := range m.ToolCalls {
		fmt.Fprintf(&b, "|%s %s %s", tc.ID, tc.Name, tc.Arguments)
	}
	return b.String()
}

func TestExportFollowsTheModelsContexts(t *testing.T) {
	home, inputs := t.TempDir(), lrFiles(t, 20, 24<<10)
	ep := &lrReader{files: 20, summary: "Summary: " + strings.Repeat("the agent read another input file and noted its numbered lines; ", 36)}
	srv := llmtest.NewOpenAI(t, ep.policy)
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "--context-window", fmt.Sprint(lrWindow), "read every file")...)
	cs := lrCompactions(t, runtest.Events(t, s.RunDir))
	tiers := map[int]bool{}
	for _, c := range cs {
		tiers[c.Tier] = true
	}
	if !tiers[1] || !tiers[2] {
		t.Fatalf("the run was not forced through tier 1 and tier 2: %+v", cs)
	}
	reqs := ep.agentRequests()
	sent := map[string]int{} // a request's messages, rendered -> its index
	for i, r := range reqs {
		var parts []string
		for _, m := range r.Messages {
			parts = append(parts, wireOf(m))
		}
		sent[strings.Join(parts, "\n")] = i
	}

	for _, flavor := range []string{"openai", "hf"} {
		t.Run(flavor, func(t *testing.T) {
			code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", "--flavor", flavor, s.RunID)
			if code != 0 {
				t.Fatalf("export: exit %d\n%s", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) < 3 {
				t.Fatalf("%d samples; a run through tier 1 and tier 2 has at least three contexts", len(lines))
			}
			matched := map[int]bool{}
			copied, stubs, summaries := 0, 0, 0
			for n, l := range lines {
				var sample struct {
					Messages []sampleMsg `json:"messages"`
					Metadata any         `json:"metadata"`
				}
				if err := json.Unmarshal([]byte(l), &sample); err != nil {
					t.Fatal(err)
				}
				if sample.Metadata != nil {
					t.Errorf("sample %d carries metadata without --metadata inline", n)
				}
				if last := sample.Messages[len(sample.Messages)-1]; last.Role != "assistant" {
					t.Errorf("sample %d ends on a %s message, not on the model's reply", n, last.Role)
				}
				var prefix []string
				for i, m := range sample.Messages {
					if strings.HasPrefix(derefS(m.Content), "[evicted to save context") {
						stubs++
					}
					if strings.Contains(derefS(m.Content), "Summary of earlier work") {
						summaries++
					}
					if m.Role == "assistant" {
						if m.Weight == nil {
							t.Fatalf("sample %d message %d: an assistant turn without weight", n, i)
						}
						if *m.Weight == 1 {
							k, ok := sent[strings.Join(prefix, "\n")]
							if !ok {
								t.Errorf("sample %d: the %d messages before trained turn %d are no request the endpoint received", n, i, i)
							}
							matched[k] = true
						} else {
							copied++
						}
					}
					if m.Role == "tool" && flavor == "hf" && m.Name == "" {
						t.Errorf("sample %d message %d: an hf tool message without name", n, i)
					}
					prefix = append(prefix, m.wire(t))
				}
			}
			if len(matched) != len(reqs) {
				t.Errorf("%d of the %d requests the endpoint received are trained on", len(matched), len(reqs))
			}
			if copied == 0 || stubs == 0 || summaries == 0 {
				t.Errorf("copied turns %d, eviction stubs %d, summaries %d: the contexts after compaction are not the ones sent", copied, stubs, summaries)
			}
		})
	}

	t.Run("atif", func(t *testing.T) {
		for _, v := range []string{"1.7", "1.8"} {
			dir := t.TempDir()
			if code, _, errOut := cli(t, "export", "--home", home, "--format", "atif", "--atif-version", v, "--out", dir, s.RunID); code != 0 {
				t.Fatalf("export atif %s: exit %d\n%s", v, code, errOut)
			}
			files, _ := filepath.Glob(filepath.Join(dir, s.RunID, "*.json"))
			if len(files) < 3 {
				t.Errorf("ATIF %s: %d documents, want one per context", v, len(files))
			}
			var steps, copiedSteps, metrics int
			for _, f := range files {
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range atiftest.Validate(raw) {
					t.Errorf("ATIF %s %s: %s", v, filepath.Base(f), e)
				}
				var doc struct {
					Version string `json:"schema_version"`
					Steps   []struct {
						Source    string          `json:"source"`
						Timestamp string          `json:"timestamp"`
						Copied    bool            `json:"is_copied_context"`
						Metrics   json.RawMessage `json:"metrics"`
					} `json:"steps"`
				}
				json.Unmarshal(raw, &doc)
				if doc.Version != "ATIF-v"+v {
					t.Errorf("%s: schema_version %q", filepath.Base(f), doc.Version)
				}
				for _, st := range doc.Steps {
					steps++
					if st.Copied {
						copiedSteps++
					}
					if st.Source == "agent" && !st.Copied {
						metrics++
						if st.Timestamp == "" || len(st.Metrics) == 0 {
							t.Errorf("%s: an agent step without timestamp or metrics", filepath.Base(f))
						}
					}
				}
			}
			if copiedSteps == 0 || metrics != len(reqs) {
				t.Errorf("ATIF %s: %d copied steps, %d agent steps with metrics for %d calls", v, copiedSteps, metrics, len(reqs))
			}
		}
		dir := t.TempDir()
		if code, _, errOut := cli(t, "export", "--home", home, "--format", "atif", "--layout", "harbor", "--out", dir, s.RunID); code != 0 {
			t.Fatalf("export --layout harbor: exit %d\n%s", code, errOut)
		}
		for _, e := range atiftest.ValidateTrial(filepath.Join(dir, s.RunID)) {
			t.Errorf("trial directory: %s", e)
		}
	})
}

func derefS(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The openai flavour passes OpenAI's per-line schema (no metadata key, no
// name on tool messages, arguments as text, weights 0 or 1); the hf flavour
// renders through a Qwen2.5-style template without double-encoded
// arguments; failed turns can be masked.
func TestExportChatFlavours(t *testing.T) {
	home := t.TempDir()
	id := fakeRun(t, home, 0, []string{"List your files, then finish"},
		calls(call("list_files", map[string]any{"path": "/workspace", "n": json.Number("12345678901234567890")}), bash("exit 3")),
		calls(finish("listed")))

	c := jsonschema.NewCompiler()
	sch, err := c.Compile("testdata/openai-finetune-chat.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", "--mask", "failed", id)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); err != nil {
			t.Errorf("the openai flavour breaks OpenAI's per-line schema: %v\n%s", err, l)
		}
		var sample struct{ Messages []sampleMsg }
		json.Unmarshal([]byte(l), &sample)
		var weights []int
		for _, m := range sample.Messages {
			if m.Weight != nil {
				weights = append(weights, *m.Weight)
			}
		}
		// The first turn's bash call failed (exit 3): masked; the finish is trained.
		if fmt.Sprint(weights) != "[0 1]" {
			t.Errorf("weights %v, want [0 1] with --mask failed", weights)
		}
	}
	// The check is not vacuous: a metadata key is refused.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"messages":[{"role":"user","content":"x"}],"metadata":{}}`))
	if sch.Validate(bad) == nil {
		t.Error("the schema accepts a top-level metadata key")
	}

	code, out, errOut = cli(t, "export", "--home", home, "--format", "chat", "--flavor", "hf", id)
	if code != 0 {
		t.Fatalf("export hf: exit %d\n%s", code, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var sample struct {
			Messages []sampleMsg `json:"messages"`
		}
		if err := json.Unmarshal([]byte(l), &sample); err != nil {
			t.Fatal(err)
		}
		for _, m := range sample.Messages {
			for _, tc := range m.ToolCalls {
				// Qwen2.5's chat template renders a call as
				//   '{"name": "' + name + '", "arguments": ' + (arguments | tojson) + '}'
				// (tojson of a string would nest the JSON in a string).
				rendered := `{"name": "` + tc.Function.Name + `", "arguments": ` + string(tc.Function.Arguments) + `}`
				var call struct {
					Arguments map[string]json.RawMessage `json:"arguments"`
				}
				if err := json.Unmarshal([]byte(rendered), &call); err != nil || call.Arguments == nil {
					t.Errorf("%s renders as %s: arguments are not an object (%v)", tc.Function.Name, rendered, err)
				}
				if n := string(call.Arguments["n"]); tc.Function.Name == "list_files" && n != "12345678901234567890" {
					t.Errorf("list_files n = %s: the number was not kept as sent", n)
				}
			}
		}
	}
}
