package web

import (
	"context"
	"net/http"
	"time"
)

// Queue reports the workers of the rollout queue apodex serve was pointed
// at (--nats; internal/jetstream, wired in cmd/apodex) and the rollouts
// they hold. Config.Queue nil: no queue, GET /api/workers is a 404.
type Queue interface {
	Workers(ctx context.Context) (QueueStatus, error)
}

// QueueStatus is GET /api/workers: the live workers (each renews its
// heartbeat every few seconds; a dead one drops out within a minute) and
// every eval's rollouts in flight with the worker that holds each.
type QueueStatus struct {
	URL      string         `json:"url"`
	Workers  []QueueWorker  `json:"workers"`
	InFlight []QueueRollout `json:"in_flight"`
}

// QueueWorker is one worker's last heartbeat.
type QueueWorker struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	Running   int64     `json:"running"`
	Done      int64     `json:"done"`
	Heartbeat time.Time `json:"heartbeat"`
}

// QueueRollout is a rollout held by a worker.
type QueueRollout struct {
	Eval    string    `json:"eval"`
	Rollout string    `json:"rollout"` // world/config/index
	Worker  string    `json:"worker"`
	RunID   string    `json:"run_id,omitempty"`
	Renewed time.Time `json:"renewed"`
}

// queueTimeout bounds one look at the queue: an unreachable server is an
// answer, not a hung page.
const queueTimeout = 10 * time.Second

func (s *Server) getWorkers(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Queue == nil {
		writeError(w, errNotFound("no queue: start apodex serve with --nats URL (or APODEX_NATS_URL) to list the workers of queued evals"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queueTimeout)
	defer cancel()
	st, err := s.cfg.Queue.Workers(ctx)
	if err != nil {
		writeError(w, &httpError{http.StatusBadGateway, "the queue did not answer: " + err.Error() + "; is its nats-server up?"})
		return
	}
	if st.Workers == nil {
		st.Workers = []QueueWorker{}
	}
	if st.InFlight == nil {
		st.InFlight = []QueueRollout{}
	}
	writeJSON(w, http.StatusOK, st)
}
