package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is another agent's MCP client, for tests of apodex mcp serve.
type Client struct {
	cs *sdk.ClientSession

	mu       sync.Mutex
	progress map[string]func(string)
	next     int
}

func newClient() (*Client, *sdk.Client) {
	c := &Client{progress: map[string]func(string){}}
	return c, sdk.NewClient(&sdk.Implementation{Name: "mcptest-client", Version: Version}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			f := c.progress[fmt.Sprint(r.Params.ProgressToken)]
			c.mu.Unlock()
			if f != nil {
				f(r.Params.Message)
			}
		},
	})
}

// Dial starts cmd and speaks MCP with it over its stdio; the test closes
// the session (Close) or it is closed at the test's end.
func Dial(t testing.TB, cmd *exec.Cmd) *Client {
	t.Helper()
	c, client := newClient()
	cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", cmd.Path, err)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c
}

// DialHTTP connects to a streamable HTTP endpoint with a bearer token; the
// error is the connection's.
func DialHTTP(t testing.TB, url, token string) (*Client, error) {
	t.Helper()
	c, client := newClient()
	hc := &http.Client{Transport: bearer{token}}
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c, nil
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Close ends the session (for stdio: closes the server's stdin).
func (c *Client) Close() error { return c.cs.Close() }

// Tools lists the server's tools with their descriptions.
func (c *Client) Tools(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out[t.Name] = t.Description
	}
	return out, nil
}

// Call calls a tool; progress, when set, gets every progress message of
// the call. It returns the text of the result and its isError.
func (c *Client) Call(ctx context.Context, name string, args map[string]any, progress func(string)) (string, bool, error) {
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	if progress != nil {
		c.mu.Lock()
		c.next++
		tok := fmt.Sprintf("p%d", c.next)
		c.progress[tok] = progress
		c.mu.Unlock()
		p.SetProgressToken(tok)
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return "", false, err
	}
	var texts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError, nil
}
