package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxResult is how much of one result's text the record keeps (the model
// reads the observation limit of it); more is cut with a note.
const MaxResult = 8 << 20

// render turns a tool result into the text the model reads: text as is,
// structured content as JSON (unless a text block already carries it),
// images, audio and resources described with their type and size.
func render(res *sdk.CallToolResult) string {
	var parts []string
	texts := map[string]bool{}
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
			texts[strings.TrimSpace(v.Text)] = true
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %s]", orUnknown(v.MIMEType), size(len(v.Data))))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %s]", orUnknown(v.MIMEType), size(len(v.Data))))
		case *sdk.ResourceLink:
			d := []string{orUnknown(v.MIMEType)}
			if v.Name != "" {
				d = append([]string{v.Name}, d...)
			}
			if v.Size != nil {
				d = append(d, size(int(*v.Size)))
			}
			if v.Description != "" {
				d = append(d, v.Description)
			}
			parts = append(parts, fmt.Sprintf("[resource link: %s (%s)]", v.URI, strings.Join(d, ", ")))
		case *sdk.EmbeddedResource:
			r := v.Resource
			switch {
			case r == nil:
				parts = append(parts, "[resource: empty]")
			case r.Blob != nil:
				parts = append(parts, fmt.Sprintf("[resource %s: %s, %s of binary data]", r.URI, orUnknown(r.MIMEType), size(len(r.Blob))))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s: %s, %s]\n%s", r.URI, orUnknown(r.MIMEType), size(len(r.Text)), r.Text))
			}
		default:
			raw, _ := json.Marshal(c)
			parts = append(parts, fmt.Sprintf("[content of another type: %s]", clip(string(raw), 200)))
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil && !texts[string(raw)] && !sameJSON(texts, raw) {
			indented, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
			parts = append(parts, "structured content:\n"+string(indented))
		}
	}
	if len(parts) == 0 {
		return "(the tool returned no content)"
	}
	return strings.Join(parts, "\n")
}

// sameJSON reports whether one of the text blocks is raw as JSON (the
// serialized copy of structured content the spec asks servers to send).
func sameJSON(texts map[string]bool, raw []byte) bool {
	var want any
	if json.Unmarshal(raw, &want) != nil {
		return false
	}
	for t := range texts {
		var got any
		if json.Unmarshal([]byte(t), &got) == nil {
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) == string(b) {
				return true
			}
		}
	}
	return false
}

func orUnknown(mime string) string {
	if mime == "" {
		return "type not given"
	}
	return mime
}

// size prints a byte count.
func size(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// capResult keeps at most MaxResult bytes of text, on a rune boundary,
// saying what was not kept.
func capResult(text string) string {
	if len(text) <= MaxResult {
		return text
	}
	n := MaxResult
	for n > 0 && text[n]&0xC0 == 0x80 {
		n--
	}
	return text[:n] + fmt.Sprintf("\n[the result was %d bytes, over the %d bytes an MCP result keeps; the rest was not kept]", len(text), MaxResult)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
