// Package mcptest is an MCP server written for tests (stdio and streamable
// HTTP) with tools that exercise every path of package mcp's client:
// text, structured, image and resource results, errors, slow calls, a
// crash, invalid JSON-RPC, huge results, a tool list that changes, a tool
// with an invalid schema, and probes of the host (files, network). A test
// binary becomes the stdio server when EnvServe is set (see Main); Binary
// copies it where a sandboxed server can run it.
package mcptest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvServe, set to "1" in a test binary's environment, makes Main serve.
const EnvServe = "APODEX_MCPTEST_SERVE"

// Environment of the served process: EnvName is the server's reported
// name (default "mcptest"), EnvHang makes it never answer, EnvExit makes
// it exit at once with an error on stderr.
const (
	EnvName = "MCPTEST_NAME"
	EnvHang = "MCPTEST_HANG"
	EnvExit = "MCPTEST_EXIT"
)

// Version is the version the server reports.
const Version = "1.2.3"

// Main serves over stdio and exits when EnvServe is set; otherwise it
// returns. Call it first in TestMain.
func Main() {
	if os.Getenv(EnvServe) != "1" {
		return
	}
	if os.Getenv(EnvExit) != "" {
		fmt.Fprintln(os.Stderr, "mcptest: cannot open the database: permission denied")
		os.Exit(4)
	}
	if os.Getenv(EnvHang) != "" {
		time.Sleep(time.Hour)
	}
	name := os.Getenv(EnvName)
	if name == "" {
		name = "mcptest"
	}
	err := New(name).Run(context.Background(), &sdk.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// PNG is the image the image tool returns (its size is in the text the
// client renders).
var PNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

// stdout is where garbage writes; the stdio transport writes there too.
var stdout io.Writer = os.Stdout

// New is the server with every test tool.
func New(name string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: Version}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	type echoIn struct {
		Text string `json:"text" jsonschema:"the text to echo"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return text("echo: " + in.Text), nil, nil
	})
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	type addOut struct {
		Sum float64 `json:"sum"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two numbers (structured result)."}, func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "A chart, as an image."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the chart:"}, &sdk.ImageContent{Data: PNG, MIMEType: "image/png"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "resource", Description: "A document and a link."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		n := int64(2048)
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.md", MIMEType: "text/markdown", Text: "# Notes\nThe answer is 42."}},
			&sdk.ResourceLink{URI: "https://example.test/report.pdf", Name: "report", MIMEType: "application/pdf", Size: &n},
		}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always reports an error."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "quota exceeded for project p1"}}}, nil, nil
	})
	type bigIn struct {
		Bytes int `json:"bytes"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "A result of the given size."}, func(_ context.Context, _ *sdk.CallToolRequest, in bigIn) (*sdk.CallToolResult, any, error) {
		line := strings.Repeat("x", 99) + "\n"
		return text(strings.Repeat(line, in.Bytes/100+1)[:in.Bytes]), nil, nil
	})
	type slowIn struct {
		Seconds float64 `json:"seconds"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Answers after a while."}, func(ctx context.Context, _ *sdk.CallToolRequest, in slowIn) (*sdk.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
		case <-ctx.Done():
		}
		return text("done"), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "The server dies."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "mcptest: fatal: out of memory")
		os.Exit(3)
		return nil, nil, nil
	})
	var garbage sync.Mutex
	sdk.AddTool(s, &sdk.Tool{Name: "garbage", Description: "The server writes what is not JSON-RPC."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		garbage.Lock()
		fmt.Fprintln(stdout, "Traceback (most recent call last): this is not JSON-RPC")
		garbage.Unlock()
		time.Sleep(time.Hour)
		return nil, nil, nil
	})
	type pathIn struct {
		Path string `json:"path"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "read_host", Description: "Read a file of the host the server runs on."}, func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return text("cannot read: " + err.Error()), nil, nil
		}
		return text("read: " + string(b)), nil, nil
	})
	type writeIn struct {
		Path string `json:"path"`
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "write_host", Description: "Write a file of the host the server runs on."}, func(_ context.Context, _ *sdk.CallToolRequest, in writeIn) (*sdk.CallToolResult, any, error) {
		if err := os.WriteFile(in.Path, []byte(in.Text), 0o644); err != nil {
			return text("cannot write: " + err.Error()), nil, nil
		}
		return text("wrote " + in.Path), nil, nil
	})
	type addrIn struct {
		Addr string `json:"addr"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "dial", Description: "Open a TCP connection."}, func(_ context.Context, _ *sdk.CallToolRequest, in addrIn) (*sdk.CallToolResult, any, error) {
		c, err := net.DialTimeout("tcp", in.Addr, 2*time.Second)
		if err != nil {
			return text("cannot connect: " + err.Error()), nil, nil
		}
		c.Close()
		return text("connected"), nil, nil
	})
	type envIn struct {
		Name string `json:"name"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "has_env", Description: "Whether a variable is set (never its value)."}, func(_ context.Context, _ *sdk.CallToolRequest, in envIn) (*sdk.CallToolResult, any, error) {
		v := os.Getenv(in.Name)
		return text(fmt.Sprintf("%s is set: %v (%d bytes)", in.Name, v != "", len(v))), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "uid", Description: "The uid the server runs as."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		return text(fmt.Sprintf("uid %d", os.Getuid())), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "read_file", Description: "Named like a built-in."}, func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
		return text("the server's read_file of " + in.Path), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "add_tool", Description: "Adds the tool late (the tool list changes)."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		sdk.AddTool(s, &sdk.Tool{Name: "late", Description: "Added during the run."}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return text("late tool answered"), nil, nil
		})
		time.Sleep(300 * time.Millisecond) // answer once the (debounced) list_changed is out
		return text("added the tool late"), nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "bad_schema", Description: "Its schema is not valid JSON Schema.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "nonsense"}}}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("never"), nil })
	return s
}

// Binary copies the running test binary into a directory anyone may read
// (a sandboxed server runs as another uid) and returns its path; the copy
// serves over stdio when started with EnvServe=1.
func Binary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mcptest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	p := filepath.Join(dir, "mcp-server")
	out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// HTTP serves a server named name over streamable HTTP on loopback; with
// a token, a request without "Authorization: Bearer TOKEN" gets 401. It
// counts the requests it answered (Requests).
type HTTP struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	Header   http.Header // the last request's headers
}

// NewHTTP starts it; the test closes it.
func NewHTTP(t testing.TB, name, token string) *HTTP {
	t.Helper()
	srv := New(name)
	h := &HTTP{}
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests++
		h.Header = r.Header.Clone()
		h.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

// Requests is how many requests it got.
func (h *HTTP) Requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests
}

// LastHeader is the last request's headers.
func (h *HTTP) LastHeader() http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Header
}
