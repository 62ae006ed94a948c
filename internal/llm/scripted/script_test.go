package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

// history returns a request that has had len(observations) assistant turns,
// each answered by one tool message with that observation.
func history(observations ...string) *llm.Request {
	req := &llm.Request{Messages: []llm.Message{user("go")}}
	for _, o := range observations {
		req.Messages = append(req.Messages, assistant(), toolMsg("x", o))
	}
	return req
}

type played struct {
	say   string
	calls [][2]string // name, arguments
}

func playOf(resp *llm.Response) played {
	p := played{say: resp.Message.Content}
	for _, c := range resp.Message.ToolCalls {
		p.calls = append(p.calls, [2]string{c.Name, c.Arguments})
	}
	return p
}

func TestScriptPlays(t *testing.T) {
	sum, err := os.ReadFile(filepath.Join("testdata", "sum.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		script  string
		req     *llm.Request
		want    played
		wantErr string
	}{
		{
			name:   "direct turn",
			script: string(sum),
			req:    history(),
			want:   played{say: "Let me look at the inputs.", calls: [][2]string{{"list_files", `{"path":"/inputs"}`}}},
		},
		{
			name:   "when: capture substituted in args and say",
			script: string(sum),
			req:    history("files: a.csv\nsum=42.5 done"),
			want: played{say: "The sum is 42.5.", calls: [][2]string{
				{"write_file", `{"path":"/workspace/sum.txt","content":"42.5\n"}`},
			}},
		},
		{
			name:   "when: fallback without match",
			script: string(sum),
			req:    history("nothing useful"),
			want:   played{calls: [][2]string{{"finish", `{"summary":"could not compute"}`}}},
		},
		{
			name:    "past the end",
			script:  string(sum),
			req:     history("a", "b", "c"),
			wantErr: "script ended at turn 3 without calling finish",
		},
		{
			name:    "no alternative matches",
			script:  `{"turns":[{"when":[{"match":"^ok$","say":"fine"}]}]}`,
			req:     history(),
			wantErr: "turn 0: no alternative matched",
		},
		{
			name:   "last observation and nested strings",
			script: `{"turns":[{"say":"start"},{"calls":[{"name":"echo","args":{"a":["${last}",{"b":"<${last}>"}],"n":1.50,"t":true,"z":null,"keep":"${1} ${HOME}"}}]}]}`,
			req:    &llm.Request{Messages: []llm.Message{assistant(), toolMsg("1", `say "hi"`), toolMsg("2", "&")}},
			want: played{calls: [][2]string{
				{"echo", `{"a":["say \"hi\"\n&",{"b":"<say \"hi\"\n&>"}],"n":1.50,"t":true,"z":null,"keep":"${1} ${HOME}"}`},
			}},
		},
		{
			name:   "group 0, missing group and keys untouched",
			script: `{"turns":[{"say":"start"},{"when":[{"match":"id=(\\w+)","calls":[{"name":"f","args":{"${1}":"${0}|${1}|${2}"}}]}]}]}`,
			req:    history("id=abc"),
			want:   played{calls: [][2]string{{"f", `{"${1}":"id=abc|abc|${2}"}`}}},
		},
		{
			name:   "raw_args played verbatim",
			script: `{"turns":[{"calls":[{"name":"read_file","raw_args":"{\"path\": ${last}"}]}]}`,
			req:    history(),
			want:   played{calls: [][2]string{{"read_file", `{"path": ${last}`}}},
		},
		{
			name:   "missing args become an empty object",
			script: `{"turns":[{"calls":[{"name":"a"},{"name":"b","args":null}]}]}`,
			req:    history(),
			want:   played{calls: [][2]string{{"a", `{}`}, {"b", `{}`}}},
		},
		{
			name:   "say only",
			script: `{"turns":[{"say":"hello ${last}"}]}`,
			req:    history(),
			want:   played{say: "hello "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.script))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := m.Generate(context.Background(), tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := playOf(resp); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("played %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestScriptEndedIsErrEnded(t *testing.T) {
	m, err := Parse([]byte(`{"turns":[{"say":"only"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), history("x")); !errors.Is(err, ErrEnded) {
		t.Errorf("err = %v, want ErrEnded", err)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string // all must appear in the error
	}{
		{"not JSON", `{"turns":`, []string{"parse script"}},
		{"trailing data", `{"turns":[{"say":"a"}]} {}`, []string{"after the top-level value"}},
		{"unknown top-level field", `{"turns":[{"say":"a"}],"model":"x"}`, []string{`unknown field "model"`}},
		{"no turns", `{}`, []string{"no turns"}},
		{"empty turns", `{"turns":[]}`, []string{"no turns"}},
		{"unknown turn field", `{"turns":[{"say":"a"},{"sya":"b"}]}`, []string{"turn 1", `unknown field "sya"`}},
		{"unknown call field", `{"turns":[{"calls":[{"name":"a","arg":{}}]}]}`, []string{"turn 0", `unknown field "arg"`}},
		{"unknown alternative field", `{"turns":[{"when":[{"matches":"x","say":"a"}]}]}`, []string{"turn 0", `unknown field "matches"`}},
		{"empty turn", `{"turns":[{"say":"a"},{"say":"b"},{}]}`, []string{"turn 2", "neither"}},
		{"empty when", `{"turns":[{"when":[]}]}`, []string{"turn 0", "neither"}},
		{"when and say", `{"turns":[{"say":"a","when":[{"say":"b"}]}]}`, []string{"turn 0", "both"}},
		{"empty alternative", `{"turns":[{"when":[{"say":"a"},{"match":"x"}]}]}`, []string{"turn 0", "alternative 1", "neither"}},
		{"bad regexp", `{"turns":[{"say":"a"},{"when":[{"match":"(","say":"b"}]}]}`, []string{"turn 1", "alternative 0", "regexp"}},
		{"call without name", `{"turns":[{"calls":[{"args":{}}]}]}`, []string{"turn 0", "call 0", "no name"}},
		{"args and raw_args", `{"turns":[{"calls":[{"name":"a","args":{},"raw_args":"{}"}]}]}`, []string{"turn 0", "both args and raw_args"}},
		{"args not an object", `{"turns":[{"calls":[{"name":"a","args":"/x"}]}]}`, []string{"turn 0", "JSON object"}},
		{"turn not an object", `{"turns":[{"say":"a"},"say"]}`, []string{"turn 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.script))
			if err == nil {
				t.Fatalf("Parse accepted %s", tt.script)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "sum.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Replay the whole demo: every turn's observation feeds the next.
	req := history()
	var names []string
	for _, obs := range []string{"sum=3", "written", "done"} {
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, resp.Message.ToolCalls[0].Name)
		req.Messages = append(req.Messages, resp.Message, toolMsg(resp.Message.ToolCalls[0].ID, obs))
	}
	if want := []string{"list_files", "write_file", "finish"}; !reflect.DeepEqual(names, want) {
		t.Errorf("played %v, want %v", names, want)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"turns":[{}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "turn 0") {
		t.Errorf("Load(bad) = %v, want an error naming the file and turn 0", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	if sum, err := os.ReadFile(filepath.Join("testdata", "sum.json")); err == nil {
		f.Add(sum, "sum=1")
	}
	f.Add([]byte(`{"turns":[{"calls":[{"name":"a","args":{"x":["${last}",{"y":"${1}"}]}}]}]}`), `"\`)
	f.Add([]byte(`{"turns":[{"when":[{"match":"(a)(b)?","calls":[{"name":"a","raw_args":"{"}]}]}]}`), "a")
	f.Add([]byte(`{"turns":[{"say":"${0}"}]}`), "")
	f.Add([]byte(`{"turns":null}`), "")
	f.Fuzz(func(t *testing.T, data []byte, obs string) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		for _, req := range []*llm.Request{history(), history(obs), history(obs, obs)} {
			resp, err := m.Generate(context.Background(), req)
			if err != nil {
				continue
			}
			if resp.Message.Role != llm.RoleAssistant {
				t.Errorf("role = %q", resp.Message.Role)
			}
		}
	})
}
