package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// heartbeat keeps idle streams open through proxies.
const heartbeat = 15 * time.Second

// stream is Server-Sent Events: one "record" event per record event, with
// "id: <seq>" and the event's line as data, from after Last-Event-ID (or
// ?after=). When the run's record closes it sends an "end" event and stops.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, dir string) error {
	after, err := afterParam(r)
	if err != nil {
		return err
	}
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID %q: give a record seq", v)
		}
		after = n
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("web: the connection cannot stream")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	fl.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type item struct {
		e   record.Event
		err error
	}
	events := make(chan item)
	done := make(chan struct{})
	go func() { // owned by this handler: it ends with ctx or with the record
		defer close(done)
		for e, err := range record.Follow(ctx, dir, after) {
			select {
			case events <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			fmt.Fprint(w, "event: end\ndata: {}\n\n")
			fl.Flush()
			return nil
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case it := <-events:
			if it.err != nil {
				fmt.Fprintf(w, "event: error\ndata: %q\n\n", it.err.Error())
				fl.Flush()
				return nil
			}
			fmt.Fprintf(w, "id: %d\nevent: record\ndata: %s\n\n", it.e.Seq, it.e.Raw)
			fl.Flush()
		}
	}
}
