package web

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/runview"
)

// MaxBody is the largest POST body accepted.
const MaxBody = 64 << 10

// cookieName carries the token for the page (EventSource cannot set headers).
const cookieName = "apodex_token"

//go:embed page
var pageFS embed.FS

// Config is what the server needs.
type Config struct {
	Home  string // where runs are kept
	Token string // "" = no token (loopback only)
	// ControlKey, without a Token, is needed by every state-changing
	// request (messages, controls): as "Authorization: Bearer KEY" or the
	// cookie the page gets from /?token=KEY. apodex serve makes one per
	// process and prints it only in its URL, so a command in a run's
	// sandbox that reaches loopback (--network host) can read the page
	// but cannot steer a run. "" = none.
	ControlKey string
	// Sender names who sends messages from the page (recorded in the inbox).
	Sender string
	Log    *slog.Logger
	// Queue lists the workers of queued evals (GET /api/workers); nil: none.
	Queue Queue
}

// Server serves the API and the page. Make it with New.
type Server struct {
	cfg  Config
	mux  *http.ServeMux
	live lives // one live state per open run
}

// New returns the server for cfg.
func New(cfg Config) *Server {
	if cfg.Sender == "" {
		cfg.Sender = "web"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.routes()
	return s
}

// NewToken is a random token for a server that listens beyond loopback.
func NewToken() string {
	b := make([]byte, 18)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// IsLoopback reports whether addr (host:port) listens on loopback only.
// An empty host (all interfaces) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) routes() {
	api := func(pattern string, h func(http.ResponseWriter, *http.Request, string) error) {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			dir, err := s.runDir(r.PathValue("id"))
			if err == nil {
				err = h(w, r, dir)
			}
			if err != nil {
				writeError(w, err)
			}
		})
	}
	s.mux.HandleFunc("GET /api/runs", func(w http.ResponseWriter, r *http.Request) {
		runs, err := listRuns(s.cfg.Home)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, runs)
	})
	s.mux.HandleFunc("GET /api/workers", s.getWorkers)
	api("GET /api/runs/{id}", s.getLive(loadRun))
	api("GET /api/runs/{id}/events", s.getEvents)
	api("GET /api/runs/{id}/stream", s.stream)
	api("GET /api/runs/{id}/board", s.getLive(loadBoard))
	api("GET /api/runs/{id}/activity", s.getLive(loadActivity))
	api("GET /api/runs/{id}/files", s.getLive(loadFiles))
	api("GET /api/runs/{id}/files/{path...}", s.getFile)
	api("GET /api/runs/{id}/evidence", s.getLive(loadEvidence))
	api("GET /api/runs/{id}/claims", s.getLive(loadClaims))
	api("GET /api/runs/{id}/transcript", s.getTranscript)
	api("POST /api/runs/{id}/messages", s.postMessage)
	api("POST /api/runs/{id}/control", s.postControl)
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNotFound("no such API path %s %s; see /api/runs", r.Method, r.URL.Path))
	})
	static, _ := fs.Sub(pageFS, "page")
	files := http.FileServerFS(static)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, &httpError{http.StatusMethodNotAllowed, "the page is read with GET; the API is under /api"})
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && s.secret() != "" {
			if !s.secretOK(t) {
				writeError(w, &httpError{http.StatusUnauthorized, "wrong token; use the URL apodex serve printed"})
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if r.URL.Path != "/" && r.URL.Path != "/app.js" && r.URL.Path != "/style.css" && r.URL.Path != "/workers.js" {
			r.URL.Path = "/" // the page routes itself (#/runs/ID)
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}

// ServeHTTP checks Host, token and Origin, then routes; a panic becomes a
// 500 with a JSON error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Log.Error("web: handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeError(w, &httpError{http.StatusInternalServerError, "internal error; the server log has the details"})
		}
	}()
	if err := s.admit(r); err != nil {
		writeError(w, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// admit is the gate every request passes.
func (s *Server) admit(r *http.Request) error {
	if s.cfg.Token == "" && !loopbackHost(r.Host) {
		return &httpError{http.StatusForbidden, "this server answers only to localhost; restart apodex serve with --token to reach it by another name"}
	}
	isAPI := strings.HasPrefix(r.URL.Path, "/api/")
	if s.cfg.Token != "" && isAPI && !s.authorized(r) {
		return &httpError{http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer TOKEN, or open the URL apodex serve printed"}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if s.cfg.Token == "" && s.cfg.ControlKey != "" && isAPI && !s.authorized(r) {
			return &httpError{http.StatusUnauthorized, "messages and controls need the key in the URL apodex serve printed: open that URL once (the page keeps it in a cookie), or send Authorization: Bearer KEY"}
		}
		if err := sameOrigin(r); err != nil {
			return err
		}
		if isAPI {
			ct := r.Header.Get("Content-Type")
			if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
				return &httpError{http.StatusUnsupportedMediaType, "send the body as Content-Type: application/json"}
			}
		}
	}
	return nil
}

// authorized reports whether r carries the server's secret (secret).
func (s *Server) authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		t, ok := strings.CutPrefix(h, "Bearer ")
		return ok && s.secretOK(t)
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return s.secretOK(c.Value)
	}
	return false
}

// secret is what the page's cookie carries: the token, else the control key.
func (s *Server) secret() string {
	if s.cfg.Token != "" {
		return s.cfg.Token
	}
	return s.cfg.ControlKey
}

func (s *Server) secretOK(t string) bool {
	want := s.secret()
	return want != "" && subtle.ConstantTimeCompare([]byte(t), []byte(want)) == 1
}

// sameOrigin refuses a state-changing request from another site. A client
// that is not a browser sends neither header and is let through (it must
// still hold the token, when there is one).
func sameOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return &httpError{http.StatusForbidden, "cross-site request refused; use the page served by apodex serve"}
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host || (u.Scheme != "http" && u.Scheme != "https") {
		return &httpError{http.StatusForbidden, fmt.Sprintf("origin %q is not this server (%s); use the page served by apodex serve", o, r.Host)}
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// runDir finds the run id names, or says why not.
func (s *Server) runDir(id string) (string, error) {
	if id == "" {
		return "", nil // a route without {id}
	}
	if !runIDPattern.MatchString(id) || strings.Contains(id, "..") {
		return "", &httpError{http.StatusBadRequest, fmt.Sprintf("bad run id %q: ids are letters, digits, '.', '_' and '-'; list them at /api/runs", id)}
	}
	dir, err := runview.Dir(s.cfg.Home, id)
	if err != nil {
		return "", errNotFound("no run %q; list the runs at /api/runs", id)
	}
	return dir, nil
}

// httpError is an error with the status it maps to.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errNotFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeError is the one place errors become HTTP statuses.
func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &mbe):
		he = &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes; send less", mbe.Limit)}
	default:
		he = &httpError{http.StatusInternalServerError, err.Error()}
	}
	writeJSON(w, he.status, map[string]string{"error": he.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error": "the answer does not encode as JSON"}`)
	}
	writeRaw(w, status, append(body, '\n'))
}

// writeRaw writes body, JSON already encoded.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// decodeBody reads a JSON body of at most MaxBody bytes into v, refusing
// unknown fields and trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("bad JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("bad JSON body: one object only")
	}
	return nil
}
