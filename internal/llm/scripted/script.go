package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

// ErrEnded is returned, wrapped, when a run asks for a turn past the end of
// its script.
var ErrEnded = errors.New("scripted: the script ended")

type (
	fileSpec struct {
		Turns []json.RawMessage `json:"turns"`
		// Agents are per-agent scripts by agent id ("lead", "A1", …);
		// "*" plays for any agent without its own. Turns alone is the
		// script of every agent.
		Agents map[string]struct {
			Turns []json.RawMessage `json:"turns"`
		} `json:"agents"`
	}
	turnSpec struct {
		Say   string     `json:"say"`
		Calls []callSpec `json:"calls"`
		When  []altSpec  `json:"when"`
	}
	altSpec struct {
		Match string     `json:"match"`
		Say   string     `json:"say"`
		Calls []callSpec `json:"calls"`
	}
	callSpec struct {
		Name    string          `json:"name"`
		Args    json.RawMessage `json:"args"`
		RawArgs *string         `json:"raw_args"`
	}
)

type script struct {
	turns []turn
}

// turn has exactly one of direct and when.
type turn struct {
	direct *reply
	when   []alternative
}

type alternative struct {
	re    *regexp.Regexp // nil: always matches
	reply reply
}

type reply struct {
	say   string
	calls []call
}

type call struct {
	name string
	args []byte // JSON text; expanded unless raw
	raw  bool
}

// Load reads and parses the script file at path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse validates a JSON script and returns the Model that plays it. Unknown
// fields, empty turns, bad regexps and malformed args are rejected with an
// error naming the turn.
func Parse(data []byte) (*Model, error) {
	var f fileSpec
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("scripted: parse script: %w", err)
	}
	if len(f.Turns) == 0 && len(f.Agents) == 0 {
		return nil, errors.New(`scripted: the script has no turns; give a "turns" list (or "agents": {"lead": {"turns": [...]}, ...})`)
	}
	if len(f.Turns) > 0 && len(f.Agents) > 0 {
		return nil, errors.New(`scripted: give either "turns" or "agents", not both`)
	}
	if len(f.Agents) == 0 {
		s, err := compileScript(f.Turns, "")
		if err != nil {
			return nil, err
		}
		return New(s.play), nil
	}
	scripts := map[string]*script{}
	for name, a := range f.Agents {
		if len(a.Turns) == 0 {
			return nil, fmt.Errorf("scripted: agent %q has no turns", name)
		}
		s, err := compileScript(a.Turns, "agent "+name+": ")
		if err != nil {
			return nil, err
		}
		scripts[name] = s
	}
	return New(func(n int, req *llm.Request) (*llm.Response, error) {
		s, ok := scripts[req.Agent]
		if !ok {
			s, ok = scripts["*"]
		}
		if !ok {
			return nil, fmt.Errorf("scripted: no script for agent %q (and no \"*\" script)", req.Agent)
		}
		return s.play(n, req)
	}), nil
}

func compileScript(turns []json.RawMessage, where string) (*script, error) {
	s := &script{turns: make([]turn, len(turns))}
	for i, raw := range turns {
		t, err := compileTurn(raw)
		if err != nil {
			return nil, fmt.Errorf("scripted: %sturn %d: %w", where, i, err)
		}
		s.turns[i] = t
	}
	return s, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the top-level value")
	}
	return nil
}

func compileTurn(raw json.RawMessage) (turn, error) {
	var ts turnSpec
	if err := decodeStrict(raw, &ts); err != nil {
		return turn{}, err
	}
	hasDirect := ts.Say != "" || len(ts.Calls) > 0
	switch {
	case len(ts.When) > 0 && hasDirect:
		return turn{}, errors.New(`has both "when" and say/calls; put them in an alternative`)
	case len(ts.When) == 0 && !hasDirect:
		return turn{}, errors.New(`has neither say/calls nor "when"`)
	case hasDirect:
		r, err := compileReply(ts.Say, ts.Calls)
		if err != nil {
			return turn{}, err
		}
		return turn{direct: &r}, nil
	}
	t := turn{when: make([]alternative, len(ts.When))}
	for j, a := range ts.When {
		if a.Say == "" && len(a.Calls) == 0 {
			return turn{}, fmt.Errorf("alternative %d: has neither say nor calls", j)
		}
		r, err := compileReply(a.Say, a.Calls)
		if err != nil {
			return turn{}, fmt.Errorf("alternative %d: %w", j, err)
		}
		t.when[j].reply = r
		if a.Match != "" {
			re, err := regexp.Compile(a.Match)
			if err != nil {
				return turn{}, fmt.Errorf("alternative %d: bad match regexp: %w", j, err)
			}
			t.when[j].re = re
		}
	}
	return t, nil
}

func compileReply(say string, specs []callSpec) (reply, error) {
	r := reply{say: say, calls: make([]call, len(specs))}
	for k, c := range specs {
		if c.Name == "" {
			return reply{}, fmt.Errorf("call %d: no name", k)
		}
		hasArgs := len(c.Args) > 0 && string(c.Args) != "null"
		switch {
		case hasArgs && c.RawArgs != nil:
			return reply{}, fmt.Errorf("call %d (%s): has both args and raw_args", k, c.Name)
		case c.RawArgs != nil:
			r.calls[k] = call{name: c.Name, args: []byte(*c.RawArgs), raw: true}
		case !hasArgs:
			r.calls[k] = call{name: c.Name, args: []byte("{}")}
		default:
			if bytes.TrimSpace(c.Args)[0] != '{' {
				return reply{}, fmt.Errorf("call %d (%s): args must be a JSON object; use raw_args for anything else", k, c.Name)
			}
			r.calls[k] = call{name: c.Name, args: c.Args}
		}
	}
	return r, nil
}

// play is the script's Policy.
func (s *script) play(n int, req *llm.Request) (*llm.Response, error) {
	if n >= len(s.turns) {
		return nil, fmt.Errorf("%w at turn %d without calling finish; add a last turn that calls finish", ErrEnded, n)
	}
	obs := LastObservation(req)
	t := s.turns[n]
	if t.direct != nil {
		return t.direct.render(nil, obs)
	}
	for _, a := range t.when {
		if a.re == nil {
			return a.reply.render(nil, obs)
		}
		if groups := a.re.FindStringSubmatch(obs); groups != nil {
			return a.reply.render(groups, obs)
		}
	}
	return nil, fmt.Errorf("scripted: turn %d: no alternative matched the last observation %q; add one without \"match\" as a fallback", n, shorten(obs, 200))
}

func (r *reply) render(groups []string, obs string) (*llm.Response, error) {
	resp := Text(expand(r.say, groups, obs))
	for _, c := range r.calls {
		args := string(c.args)
		if !c.raw {
			var err error
			if args, err = expandJSON(c.args, groups, obs); err != nil {
				return nil, fmt.Errorf("scripted: call %s: %w", c.name, err)
			}
		}
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, llm.ToolCall{Name: c.name, Arguments: args})
	}
	return resp, nil
}

var refRE = regexp.MustCompile(`\$\{(last|[0-9]+)\}`)

// expand replaces ${N} by groups[N] and ${last} by obs; other references
// stay as written.
func expand(s string, groups []string, obs string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return refRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if name == "last" {
			return obs
		}
		if i, err := strconv.Atoi(name); err == nil && i < len(groups) {
			return groups[i]
		}
		return ref
	})
}

// expandJSON re-emits the JSON text data compactly, in its own key order,
// with expand applied to every string value (not to object keys).
func expandJSON(data []byte, groups []string, obs string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	type frame struct {
		object bool
		n      int // tokens written inside; in objects keys and values alternate
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		isKey := false
		if len(stack) > 0 && tok != json.Delim('}') && tok != json.Delim(']') {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out.WriteByte(':')
			case top.n > 0:
				out.WriteByte(',')
			}
			isKey = top.object && top.n%2 == 0
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			if v == '{' || v == '[' {
				stack = append(stack, frame{object: v == '{'})
			} else {
				stack = stack[:len(stack)-1]
			}
		case string:
			if !isKey {
				v = expand(v, groups, obs)
			}
			if err := enc.Encode(v); err != nil {
				return "", err
			}
			out.Truncate(out.Len() - 1) // Encode's newline
		case json.Number:
			out.WriteString(v.String())
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
	}
	return out.String(), nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
