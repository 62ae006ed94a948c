package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Prefix starts the name of every MCP tool offered to a model.
const Prefix = "mcp__"

// maxName is the longest tool name the providers accept.
const maxName = 64

// ToolName is the name server's tool is offered as: mcp__SERVER__TOOL,
// with every character the providers refuse (outside A-Z a-z 0-9 _ -)
// made '_', shortened with a hash of the tool's own name when over 64
// bytes. A built-in's name never has the prefix, so none is shadowed.
func ToolName(server, toolName string) string {
	n := Prefix + sanitize(server) + "__" + sanitize(toolName)
	if len(n) <= maxName {
		return n
	}
	sum := sha256.Sum256([]byte(toolName))
	tag := "_" + hex.EncodeToString(sum[:4])
	return n[:maxName-len(tag)] + tag
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// compileSchema checks a tool's input schema the way the providers do: a
// JSON object of type "object" that compiles as JSON Schema (draft
// 2020-12 unless it says otherwise) without reaching any file or URL.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errors.New("it has no input schema")
	}
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, errors.New("its input schema is not a JSON object")
	}
	if top["type"] != "object" {
		return nil, fmt.Errorf(`its input schema has type %v, not "object"`, top["type"])
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("its input schema does not parse: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("mcp-tool.json", doc); err != nil {
		return nil, fmt.Errorf("its input schema is not valid JSON Schema: %v", oneLine(err.Error()))
	}
	s, err := c.Compile("mcp-tool.json")
	if err != nil {
		return nil, fmt.Errorf("its input schema is not valid JSON Schema: %v", oneLine(err.Error()))
	}
	return s, nil
}

// noLoader refuses every outside reference: a server's schema never makes
// Apodex read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("the schema refers to %s, which is not loaded", url)
}

// checkArgs validates a call's arguments against the tool's schema.
func checkArgs(s *jsonschema.Schema, raw json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("they are not JSON: %v", err)
	}
	if _, ok := inst.(map[string]any); !ok {
		return errors.New("they are not a JSON object")
	}
	if err := s.Validate(inst); err != nil {
		return errors.New(oneLine(err.Error()))
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
