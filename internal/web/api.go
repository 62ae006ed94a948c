package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runview"
)

// maxFile is the most of one file /files/<path> returns.
const maxFile = 2 << 20

// planes are the run directories /files/<path> may read.
var planes = []string{"inputs", "workspace", "outputs"}

// afterParam is ?after=SEQ (0 when absent).
func afterParam(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("after=%q: give a record seq, a whole number ≥ 0", v)
	}
	return n, nil
}

// getEvents is the record's events after ?after=SEQ, as they are in the log.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, dir string) error {
	after, err := afterParam(r)
	if err != nil {
		return err
	}
	c, err := record.Read(dir)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, "[")
	n := 0
	for _, e := range c.Events {
		if e.Seq <= after {
			continue
		}
		if n > 0 {
			io.WriteString(w, ",\n")
		}
		w.Write(e.Raw)
		n++
	}
	io.WriteString(w, "]\n")
	return nil
}

// getTranscript is the readable transcript entries after ?after=SEQ.
func (s *Server) getTranscript(w http.ResponseWriter, r *http.Request, dir string) error {
	after, err := afterParam(r)
	if err != nil {
		return err
	}
	return s.getLive(func(l *liveRun) (any, error) { return l.transcriptAfter(after), nil })(w, r, dir)
}

// planeFile cleans a /files/<path> into a path under one plane, refusing
// anything that is not plainly there.
func planeFile(p string) (string, error) {
	p = strings.TrimPrefix(p, "/")
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return "", &httpError{http.StatusBadRequest, fmt.Sprintf("file path %q: no '.' or '..' parts; give a plane path such as outputs/report.md", p)}
		}
	}
	if strings.ContainsAny(p, "\\\x00") || p != path.Clean(p) {
		return "", badRequest("file path %q is not a clean plane path; give one such as outputs/report.md", p)
	}
	plane, _, _ := strings.Cut(p, "/")
	for _, pl := range planes {
		if plane == pl {
			return p, nil
		}
	}
	return "", &httpError{http.StatusForbidden, fmt.Sprintf("file path %q is outside the run's planes; it must start with inputs/, workspace/ or outputs/", p)}
}

// getFile serves one file of the run's planes as text, as the run left it
// (a world rollout's untouched files from the stored world: runfiles). No
// symbolic link on the way is followed, not even one that stays in the run
// directory (an agent's link to blobs/ or to the verifier's files).
func (s *Server) getFile(w http.ResponseWriter, r *http.Request, dir string) error {
	p, err := planeFile(r.PathValue("path"))
	if err != nil {
		return err
	}
	f, err := runfiles.OpenFile(dir, p)
	switch {
	case errors.Is(err, hostfs.ErrLink):
		return &httpError{http.StatusForbidden, "/" + err.Error()}
	case errors.Is(err, hostfs.ErrNotRegular):
		return errNotFound("/%s is not a file; list the files at /files", p)
	case errors.Is(err, runfiles.ErrBaseMissing):
		return errNotFound("%v", err)
	case err != nil:
		return errNotFound("no file /%s in this run; list the files at /files", p)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("Cache-Control", "no-store")
	if st.Size() > maxFile {
		w.Header().Set("X-Apodex-Truncated", strconv.FormatInt(st.Size(), 10))
	}
	io.Copy(w, io.LimitReader(f, maxFile))
	return nil
}

// acceptsInput refuses a finished run, as apodex say does.
func acceptsInput(dir string) (live bool, err error) {
	switch runview.Liveness(dir) {
	case runview.Finished:
		info, _ := runview.Load(dir)
		return false, &httpError{http.StatusConflict, fmt.Sprintf("run %s has finished (%s, %s); it takes no more messages", info.RunID, info.Status, info.Termination)}
	case runview.Stopped:
		return false, nil
	}
	return true, nil
}

// postMessage queues {text} for the run, as apodex say does.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, dir string) error {
	var body struct {
		Text string `json:"text"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Text) == "" {
		return badRequest(`no message: send {"text": "..."}`)
	}
	live, err := acceptsInput(dir)
	if err != nil {
		return err
	}
	id, err := inbox.Send(dir, s.cfg.Sender, strings.TrimSpace(body.Text))
	if err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "live": live, "note": note(live)})
	return nil
}

// postControl sends {action: pause|resume|cancel}, as apodex pause|resume|cancel do.
func (s *Server) postControl(w http.ResponseWriter, r *http.Request, dir string) error {
	var body struct {
		Action string `json:"action"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	switch body.Action {
	case inbox.ControlPause, inbox.ControlResume, inbox.ControlCancel:
	default:
		return badRequest("action %q: use pause, resume or cancel", body.Action)
	}
	live, err := acceptsInput(dir)
	if err != nil {
		return err
	}
	if err := inbox.Control(dir, body.Action, nil); err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"action": body.Action, "live": live, "note": note(live)})
	return nil
}

func note(live bool) string {
	if live {
		return "sent; the run takes it before its next model call"
	}
	return "the run is not running (it stopped without finishing); this is kept and takes effect when it resumes (apodex resume)"
}
