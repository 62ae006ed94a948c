package mcp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/apodex/apodex/internal/tool"
)

// Server side: Apodex's own tools (apodex mcp serve) offered to another
// agent. Each tool.Tool is served as an MCP tool of the same name, input
// schema and description; its Output is the text content of the result,
// IsError the result's isError. A tool reports progress with Progress.

// newServer is the MCP server of tools.
func newServer(name, version string, tools []tool.Tool) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: version}, &sdk.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	for _, t := range tools {
		spec := t.Spec()
		s.AddTool(&sdk.Tool{Name: spec.Name, Description: spec.Description, InputSchema: json.RawMessage(spec.Parameters)},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				if tok := req.Params.GetProgressToken(); tok != nil {
					sess := req.Session
					ctx = context.WithValue(ctx, progressKey{}, func(msg string, done, total float64) {
						_ = sess.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Message: msg, Progress: done, Total: total})
					})
				}
				args := req.Params.Arguments
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				r := t.Call(ctx, args)
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Output}}, IsError: r.IsError}, nil
			})
	}
	return s
}

type progressKey struct{}

// Progress tells the client of the call served in ctx how far it is
// (done of total; total 0 when unknown), when the client asked for
// progress; otherwise it does nothing.
func Progress(ctx context.Context, message string, done, total float64) {
	if f, ok := ctx.Value(progressKey{}).(func(string, float64, float64)); ok {
		f(message, done, total)
	}
}

// ServeStdio serves tools over r (the client's requests) and w until the
// client closes its end or ctx ends.
func ServeStdio(ctx context.Context, name, version string, tools []tool.Tool, r io.ReadCloser, w io.WriteCloser) error {
	err := newServer(name, version, tools).Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler serves tools over streamable HTTP. Every request must carry
// "Authorization: Bearer token" (else 401); requests to a loopback
// address naming another host are refused (DNS rebinding).
func Handler(name, version string, tools []tool.Tool, token string) http.Handler {
	srv := newServer(name, version, tools)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized: send Authorization: Bearer <the token apodex mcp serve printed>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
