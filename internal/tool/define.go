package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

// DefaultObservationLimit is how many bytes of a result the model reads when
// Env.ObservationLimit is 0.
const DefaultObservationLimit = 16 << 10

// Define builds a Tool from a typed handler. A must be a struct; each field's
// json tag names the argument (a field without omitempty is required) and its
// desc tag describes it in the JSON Schema. Supported field types: string,
// integers, floats, bool and slices of these. Arguments are decoded strictly
// (unknown, missing or mistyped arguments come back as error Results naming
// what is accepted), and the handler's Output is cut to limit bytes
// (0: DefaultObservationLimit). Define panics if A is not such a struct.
func Define[A any](name, description string, limit int, run func(ctx context.Context, args A) Result) Tool {
	var zero A
	fields, schema := argSchema(reflect.TypeOf(zero))
	if limit <= 0 {
		limit = DefaultObservationLimit
	}
	return &defined[A]{
		spec:   llm.ToolSpec{Name: name, Description: description, Parameters: schema},
		fields: fields,
		limit:  limit,
		run:    run,
	}
}

type defined[A any] struct {
	spec   llm.ToolSpec
	fields []argField
	limit  int
	run    func(ctx context.Context, args A) Result
}

// argField is one argument of a tool.
type argField struct {
	name     string
	index    int
	required bool
	kind     string // JSON Schema type, for messages
	example  string // a JSON value, for the expected shape
}

func (d *defined[A]) Spec() llm.ToolSpec { return d.spec }

func (d *defined[A]) Call(ctx context.Context, raw json.RawMessage) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Errorf("%s failed inside the runtime (%v); this is a bug, not your mistake: try another way", d.spec.Name, p)
		}
	}()
	var args A
	if r, ok := d.decode(raw, reflect.ValueOf(&args).Elem()); !ok {
		return r
	}
	return Cut(d.run(ctx, args), d.limit)
}

// decode fills v from raw, or returns the error Result the model should see.
func (d *defined[A]) decode(raw json.RawMessage, v reflect.Value) (Result, bool) {
	name := d.spec.Name
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		msg := err.Error()
		if trimmed[0] != '{' && json.Valid(trimmed) {
			msg = "got " + jsonKind(trimmed[0])
		}
		return Errorf("%s arguments must be a JSON object (%s); expected %s", name, msg, d.shape()), false
	}
	var unknown []string
	for k := range m {
		if d.field(k) == nil {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Errorf("unknown argument %s for %s; accepted: %s", strings.Join(unknown, ", "), name, d.accepted()), false
	}
	var missing []string
	for _, f := range d.fields {
		if v, ok := m[f.name]; f.required && (!ok || string(bytes.TrimSpace(v)) == "null") {
			missing = append(missing, fmt.Sprintf("%q", f.name))
		}
	}
	if len(missing) > 0 {
		return Errorf("missing required argument %s for %s; expected %s", strings.Join(missing, ", "), name, d.shape()), false
	}
	for _, f := range d.fields {
		val, ok := m[f.name]
		if !ok || string(bytes.TrimSpace(val)) == "null" {
			continue
		}
		if err := json.Unmarshal(val, v.Field(f.index).Addr().Interface()); err != nil {
			return Errorf("argument %q of %s must be %s, got %s", f.name, name, article(f.kind), clip(string(val), 80)), false
		}
	}
	return Result{}, true
}

func (d *defined[A]) field(name string) *argField {
	for i := range d.fields {
		if d.fields[i].name == name {
			return &d.fields[i]
		}
	}
	return nil
}

func (d *defined[A]) accepted() string {
	var parts []string
	for _, f := range d.fields {
		if f.required {
			parts = append(parts, f.name)
		} else {
			parts = append(parts, f.name+" (optional)")
		}
	}
	return strings.Join(parts, ", ")
}

// shape is an example argument object, e.g. {"path": "...", "offset": 1}.
func (d *defined[A]) shape() string {
	var parts []string
	for _, f := range d.fields {
		parts = append(parts, fmt.Sprintf("%q: %s", f.name, f.example))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// argSchema derives the arguments and the JSON Schema of an args struct.
func argSchema(t reflect.Type) ([]argField, json.RawMessage) {
	if t == nil || t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tool: arguments must be a struct, not %v", t))
	}
	var fields []argField
	props := map[string]any{}
	required := []string{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		prop := typeSchema(sf.Type)
		if desc := sf.Tag.Get("desc"); desc != "" {
			prop["description"] = desc
		}
		props[name] = prop
		req := !strings.Contains(","+opts+",", ",omitempty,")
		if req {
			required = append(required, name)
		}
		fields = append(fields, argField{name: name, index: i, required: req, kind: prop["type"].(string), example: example(sf.Type)})
	}
	schema, err := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	})
	if err != nil {
		panic(err)
	}
	return fields, schema
}

func typeSchema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	}
	panic(fmt.Sprintf("tool: unsupported argument type %v", t))
}

func example(t reflect.Type) string {
	switch typeSchema(t)["type"] {
	case "string":
		return `"..."`
	case "boolean":
		return "false"
	case "integer", "number":
		return "1"
	case "array":
		return "[" + example(t.Elem()) + "]"
	}
	return "null"
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func article(kind string) string {
	switch kind {
	case "integer", "array":
		return "an " + kind
	}
	return "a " + kind
}

// clip shortens s to about n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Cut fits r.Output into limit bytes for the model: it keeps a head (10/16 of
// the limit) and a tail (6/16), on line boundaries where one is near, states
// what was cut, and keeps the whole text in r.Full (unless Full is already
// set). A Result within the limit is returned unchanged.
func Cut(r Result, limit int) Result {
	if limit <= 0 {
		limit = DefaultObservationLimit
	}
	total := len(r.Output)
	if total <= limit {
		return r
	}
	head := lineBefore(r.Output, limit*10/16)
	tail := lineAfter(r.Output, total-limit*6/16)
	if r.Full == nil {
		r.Full = []byte(r.Output)
	}
	sep := "\n"
	if head == 0 || r.Output[head-1] == '\n' {
		sep = ""
	}
	r.Output = r.Output[:head] + sep + fmt.Sprintf("[... %d bytes cut of %d total; the full output is in the run record ...]\n", tail-head, total) + r.Output[tail:]
	return r
}

// lineBefore moves a cut point back to just after a newline if one is within
// the last quarter, else to a rune boundary.
func lineBefore(s string, i int) int {
	if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 && j+1 >= i-i/4 {
		return j + 1
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// lineAfter moves a cut point forward to just after a newline if one is near,
// else to a rune boundary.
func lineAfter(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 && j < (len(s)-i)/4 {
		return i + j + 1
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
