package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/web"
)

// fakeRun is a run directory with a short record that never finished, and
// files in its planes; a secret lies beside the run directory.
func fakeRun(t *testing.T, home, id string) string {
	t.Helper()
	dir := filepath.Join(home, "runs", id)
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(record.TypeRunStarted, "", map[string]any{"objective": "o"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for p, c := range map[string]string{"outputs/a.txt": "A", "workspace/w.txt": "W"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
	}
	os.WriteFile(filepath.Join(home, "secret.txt"), []byte("SECRET"), 0o644)
	os.WriteFile(filepath.Join(dir, "inbox-secret.txt"), []byte("SECRET"), 0o644)
	os.Symlink(filepath.Join(home, "secret.txt"), filepath.Join(dir, "outputs", "link.txt"))
	os.Symlink("../../../secret.txt", filepath.Join(dir, "outputs", "rel.txt"))
	// An agent's links that stay inside the run directory (F7): to a file
	// beside the planes, and a directory link up to the run directory.
	os.Symlink("../inbox-secret.txt", filepath.Join(dir, "workspace", "inside.txt"))
	os.Symlink("..", filepath.Join(dir, "workspace", "up"))
	return dir
}

type attempt struct {
	name, method, path, body string
	header                   map[string]string
	host                     string
	want                     int
}

func try(t *testing.T, srv *httptest.Server, a attempt) {
	t.Helper()
	req, err := http.NewRequest(a.method, srv.URL+a.path, strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	if a.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range a.header {
		req.Header.Set(k, v)
	}
	if a.host != "" {
		req.Host = a.host
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != a.want {
		t.Errorf("%s: status %d, want %d (%s)", a.name, resp.StatusCode, a.want, body)
	}
	if strings.Contains(string(body), "SECRET") {
		t.Errorf("%s: the answer leaks a file outside the planes: %s", a.name, body)
	}
	if resp.StatusCode >= 400 && strings.HasPrefix(a.path, "/api/") {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s: a %d without a JSON error: %s", a.name, resp.StatusCode, body)
		}
	}
}

func TestRefusals(t *testing.T) {
	home := t.TempDir()
	fakeRun(t, home, "r1")
	srv := serve(t, web.Config{Home: home})
	big := `{"text":"` + strings.Repeat("x", web.MaxBody) + `"}`
	for _, a := range []attempt{
		{"a file of the outputs plane", "GET", "/api/runs/r1/files/outputs/a.txt", "", nil, "", 200},
		{"dot-dot, encoded", "GET", "/api/runs/r1/files/outputs/%2e%2e/%2e%2e/%2e%2e/secret.txt", "", nil, "", 400},
		{"dot-dot, encoded slashes", "GET", "/api/runs/r1/files/outputs%2f..%2f..%2f..%2fsecret.txt", "", nil, "", 400},
		{"dot-dot, raw, is cleaned away by a redirect", "GET", "/api/runs/r1/files/../../secret.txt", "", nil, "", 307},
		{"outside the planes, inside the run", "GET", "/api/runs/r1/files/inbox-secret.txt", "", nil, "", 403},
		{"the record is not a plane", "GET", "/api/runs/r1/files/events.jsonl", "", nil, "", 403},
		{"absolute symlink out of the run", "GET", "/api/runs/r1/files/outputs/link.txt", "", nil, "", 403},
		{"relative symlink out of the run", "GET", "/api/runs/r1/files/outputs/rel.txt", "", nil, "", 403},
		{"symlink to a file of the run beside the planes", "GET", "/api/runs/r1/files/workspace/inside.txt", "", nil, "", 403},
		{"symlinked directory up to the run directory", "GET", "/api/runs/r1/files/workspace/up/inbox-secret.txt", "", nil, "", 403},
		{"symlinked directory back into a plane", "GET", "/api/runs/r1/files/workspace/up/outputs/a.txt", "", nil, "", 403},
		{"a directory", "GET", "/api/runs/r1/files/outputs", "", nil, "", 404},
		{"backslash", "GET", "/api/runs/r1/files/outputs\\..\\..\\secret.txt", "", nil, "", 400},
		{"bad run id", "GET", "/api/runs/..%2f..%2fetc/board", "", nil, "", 400},
		{"glob in run id", "GET", "/api/runs/r%2A/board", "", nil, "", 400},
		{"unknown run", "GET", "/api/runs/nope/board", "", nil, "", 404},
		{"unknown API path", "GET", "/api/nothing", "", nil, "", 404},
		{"bad after", "GET", "/api/runs/r1/events?after=abc", "", nil, "", 400},
		{"negative after", "GET", "/api/runs/r1/events?after=-3", "", nil, "", 400},
		{"bad Last-Event-ID", "GET", "/api/runs/r1/stream", "", map[string]string{"Last-Event-ID": "x1"}, "", 400},
		{"bad JSON", "POST", "/api/runs/r1/messages", `{"text":`, nil, "", 400},
		{"JSON of the wrong shape", "POST", "/api/runs/r1/messages", `["text"]`, nil, "", 400},
		{"unknown field", "POST", "/api/runs/r1/messages", `{"text":"a","admin":true}`, nil, "", 400},
		{"two objects", "POST", "/api/runs/r1/messages", `{"text":"a"}{"text":"b"}`, nil, "", 400},
		{"empty text", "POST", "/api/runs/r1/messages", `{"text":"  "}`, nil, "", 400},
		{"oversized body", "POST", "/api/runs/r1/messages", big, nil, "", 413},
		{"not JSON content", "POST", "/api/runs/r1/messages", `{"text":"a"}`, map[string]string{"Content-Type": "text/plain"}, "", 415},
		{"form content (a CSRF form)", "POST", "/api/runs/r1/control", `action=cancel`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", 415},
		{"foreign Origin", "POST", "/api/runs/r1/control", `{"action":"cancel"}`, map[string]string{"Origin": "http://evil.example"}, "", 403},
		{"Origin null", "POST", "/api/runs/r1/control", `{"action":"cancel"}`, map[string]string{"Origin": "null"}, "", 403},
		{"cross-site fetch", "POST", "/api/runs/r1/control", `{"action":"cancel"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403},
		{"bad action", "POST", "/api/runs/r1/control", `{"action":"rm -rf"}`, nil, "", 400},
		{"budget is not an action of the page", "POST", "/api/runs/r1/control", `{"action":"budget"}`, nil, "", 400},
		{"GET of a POST route", "GET", "/api/runs/r1/messages", "", nil, "", 404},
		{"DNS rebinding: a foreign Host without a token", "GET", "/api/runs", "", nil, "evil.example:80", 403},
		{"a loopback Host", "GET", "/api/runs", "", nil, "localhost:1234", 200},
		{"POST to the page", "POST", "/", `{}`, nil, "", 405},
	} {
		t.Run(a.name, func(t *testing.T) { try(t, srv, a) })
	}
	// A refused link is named.
	resp, err := http.Get(srv.URL + "/api/runs/r1/files/workspace/up/inbox-secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "/workspace/up is a symbolic link; not followed") {
		t.Errorf("the refusal does not name the link: %s", b)
	}
	// A stopped run takes a message, for its resume; the queue has it.
	code, out := post(t, srv, "/api/runs/r1/messages", `{"text":"later"}`)
	if code != http.StatusAccepted || out["live"] != false {
		t.Errorf("message to a stopped run: %d %v", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "runs", "r1", "inbox.jsonl")); !strings.Contains(string(b), "later") {
		t.Errorf("inbox.jsonl %q", b)
	}
}

func TestToken(t *testing.T) {
	home := t.TempDir()
	fakeRun(t, home, "r1")
	srv := serve(t, web.Config{Home: home, Token: "s3cret"})
	same := map[string]string{"Origin": srv.URL}
	bearer := map[string]string{"Authorization": "Bearer s3cret"}
	for _, a := range []attempt{
		{"no token", "GET", "/api/runs", "", nil, "", 401},
		{"wrong token", "GET", "/api/runs", "", map[string]string{"Authorization": "Bearer s3cre"}, "", 401},
		{"basic auth is not a token", "GET", "/api/runs", "", map[string]string{"Authorization": "Basic czNjcmV0"}, "", 401},
		{"wrong cookie", "GET", "/api/runs", "", map[string]string{"Cookie": "apodex_token=x"}, "", 401},
		{"bearer", "GET", "/api/runs", "", bearer, "", 200},
		{"cookie", "GET", "/api/runs", "", map[string]string{"Cookie": "apodex_token=s3cret"}, "", 200},
		{"any Host with the token", "GET", "/api/runs", "", bearer, "apodex.lan:7777", 200},
		{"stream needs it", "GET", "/api/runs/r1/stream", "", nil, "", 401},
		{"POST without token", "POST", "/api/runs/r1/control", `{"action":"pause"}`, same, "", 401},
		{"the page's link with a wrong token", "GET", "/?token=nope", "", nil, "", 401},
		{"the page's link sets the cookie", "GET", "/?token=s3cret", "", nil, "", 303},
	} {
		t.Run(a.name, func(t *testing.T) { try(t, srv, a) })
	}
	// With the token and this server's Origin, a control goes through.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/runs/r1/control", strings.NewReader(`{"action":"pause"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Origin", srv.URL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("control with token and same Origin: %d", resp.StatusCode)
	}
	resp, _ = http.DefaultTransport.RoundTrip(must(http.NewRequest("GET", srv.URL+"/?token=s3cret", nil)))
	resp.Body.Close()
	c := resp.Cookies()
	if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v: want one HttpOnly SameSite=Strict cookie", c)
	}
}

// With a control key (apodex serve without --token), reading needs nothing
// on loopback, but messages and controls need the key: a sandboxed command
// that reaches loopback (--network host) never saw it.
func TestControlKey(t *testing.T) {
	home := t.TempDir()
	fakeRun(t, home, "r1")
	srv := serve(t, web.Config{Home: home, ControlKey: "k3y"})
	ctl := `{"action":"pause"}`
	for _, a := range []attempt{
		{"reading needs no key", "GET", "/api/runs/r1/board", "", nil, "", 200},
		{"a file needs no key", "GET", "/api/runs/r1/files/outputs/a.txt", "", nil, "", 200},
		{"a control without the key", "POST", "/api/runs/r1/control", ctl, nil, "", 401},
		{"a message without the key", "POST", "/api/runs/r1/messages", `{"text":"stop"}`, nil, "", 401},
		{"a same-origin control without the key", "POST", "/api/runs/r1/control", ctl, map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}, "", 401},
		{"a wrong key", "POST", "/api/runs/r1/control", ctl, map[string]string{"Authorization": "Bearer k3"}, "", 401},
		{"a wrong cookie", "POST", "/api/runs/r1/control", ctl, map[string]string{"Cookie": "apodex_token=x"}, "", 401},
		{"the key as bearer", "POST", "/api/runs/r1/control", ctl, map[string]string{"Authorization": "Bearer k3y"}, "", 202},
		{"the key as the page's cookie", "POST", "/api/runs/r1/messages", `{"text":"hi"}`, map[string]string{"Cookie": "apodex_token=k3y"}, "", 202},
		{"the page's link with a wrong key", "GET", "/?token=nope", "", nil, "", 401},
		{"the page's link sets the cookie", "GET", "/?token=k3y", "", nil, "", 303},
	} {
		t.Run(a.name, func(t *testing.T) { try(t, srv, a) })
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:0": true,
		"0.0.0.0:7777": false, ":7777": false, "[::]:7777": false, "192.168.1.5:80": false, "example.com:80": false, "junk": false,
	} {
		if got := web.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}
