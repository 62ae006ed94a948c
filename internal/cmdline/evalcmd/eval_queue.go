package evalcmd

import (
	"context"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
	"github.com/apodex/apodex/internal/web"
)

// evalQueued is `eval SUITE --nats URL` and `eval resume ID --nats URL`:
// the plan is written here, the worlds and every unscored rollout are
// queued, and (with --wait, or an embedded server) the results are
// collected into results.jsonl as they arrive.
func evalQueued(ctx context.Context, sub, arg, url string, wait bool, opts eval.Options, stdout, stderr io.Writer) error {
	conn, stop, err := dialNATS(ctx, url, opts.Home, "apodex eval")
	if err != nil {
		return err
	}
	defer stop()
	conn.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var plan *eval.Plan
	if sub == "resume" {
		plan, err = conn.FetchPlan(ctx, opts.Home, arg) // this home's, else the queue's
	} else {
		s, lerr := eval.LoadSuite(arg)
		if lerr != nil {
			return cmdline.Usagef("%v", lerr)
		}
		plan, err = eval.Prepare(s, opts)
	}
	if err != nil {
		return err
	}
	if err := conn.PublishEval(ctx, opts.Home, plan); err != nil {
		return err
	}
	done, err := eval.ReadResults(opts.Home, plan.ID)
	if err != nil {
		return err
	}
	jobs := eval.Pending(plan, done, version.Runtime)
	n, err := conn.Publish(ctx, jobs)
	if err != nil {
		return err
	}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "eval %s: %d rollouts (%d worlds × %d configurations × %d), %d unscored, %d newly queued on %s; run `apodex worker --nats %s` on each machine\n",
			plan.ID, plan.Total(), len(plan.Worlds), len(plan.Configs), plan.Rollouts, len(jobs), n, conn.URL, workerURL(url, conn.URL))
	}
	if !wait && !isEmbedded(url) {
		fmt.Fprintf(stdout, "eval %s: queued; `apodex eval resume %s --nats %s --wait` collects the results\n", plan.ID, plan.ID, url)
		return nil
	}
	collected, err := conn.CollectEval(ctx, opts, plan)
	fmt.Fprintf(stdout, "eval %s: %d of %d results in %s/results.jsonl; see `apodex eval show %s`\n", plan.ID, collected, plan.Total(), eval.Dir(opts.Home, plan.ID), plan.ID)
	if ab := jetstream.ReadAbandoned(opts.Home, plan.ID); len(ab) > 0 {
		fmt.Fprintf(stdout, "eval %s: %d runs abandoned (not counted; kept for inspection, listed in %s)\n", plan.ID, len(ab), jetstream.AbandonedFile)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("stopped; the rollouts stay queued; `apodex eval resume %s --nats URL --wait` collects what is missing", plan.ID)
	}
	return err
}

// workerURL is the URL a worker should be given: an embedded server's own.
func workerURL(asked, actual string) string {
	if isEmbedded(asked) {
		return actual
	}
	return asked
}

// showQueued prints the live workers and the eval's rollouts in flight.
func showQueued(ctx context.Context, url, id string, w io.Writer) error {
	conn, err := jetstream.Connect(ctx, url, "apodex eval show", 0)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	defer conn.Close()
	st, err := conn.Status(ctx, id)
	if err != nil {
		return err
	}
	if n, err := conn.Scores(ctx, id); err == nil {
		fmt.Fprintf(w, "\nresults on %s: %d (collected here with `apodex eval resume %s --nats URL --wait`)", url, n, id)
	}
	fmt.Fprintf(w, "\nworkers on %s: %d\n", url, len(st.Workers))
	for _, x := range st.Workers {
		fmt.Fprintf(w, "  %s on %s: %d running, %d done, last heartbeat %s\n", x.Name, x.Host, x.Running, x.Done, x.Heartbeat.Local().Format(time.TimeOnly))
	}
	fmt.Fprintf(w, "rollouts in flight: %d\n", len(st.InFlight))
	for _, x := range st.InFlight {
		fmt.Fprintf(w, "  %s on %s (run %s, renewed %s)\n", x.Rollout, x.Worker, x.RunID, x.Since.Local().Format(time.TimeOnly))
	}
	return nil
}

// ServeQueue is the queue apodex serve lists the workers of: --nats, else
// $APODEX_NATS_URL, else the config key; nil for none.
func ServeQueue(flagValue, home string) (web.Queue, error) {
	url, err := natsURL(flagValue, home)
	if err != nil || url == "" {
		return nil, err
	}
	if isEmbedded(url) {
		return nil, cmdline.Usagef("--nats %s: serve lists a running server's workers; pass its URL (e.g. nats://127.0.0.1:4222)", url)
	}
	return &natsQueue{url: url}, nil
}

// natsQueue connects on first use (and again after a failure), so serve
// starts, and the page answers, while the server is down.
type natsQueue struct {
	url  string
	mu   sync.Mutex
	conn *jetstream.Conn
}

func (q *natsQueue) Workers(ctx context.Context) (web.QueueStatus, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn == nil {
		c, err := jetstream.Connect(ctx, q.url, "apodex serve", 0)
		if err != nil {
			return web.QueueStatus{}, err
		}
		q.conn = c
	}
	st, err := q.conn.Status(ctx, "")
	if err != nil {
		q.conn.Close()
		q.conn = nil
		return web.QueueStatus{}, err
	}
	out := web.QueueStatus{URL: q.url}
	for _, w := range st.Workers {
		out.Workers = append(out.Workers, web.QueueWorker{Name: w.Name, Host: w.Host, Running: w.Running, Done: w.Done, Heartbeat: w.Heartbeat})
	}
	for _, f := range st.InFlight {
		out.InFlight = append(out.InFlight, web.QueueRollout{Eval: f.Eval, Rollout: f.Rollout, Worker: f.Worker, RunID: f.RunID, Renewed: f.Since})
	}
	return out, nil
}

// followQueued is export --follow ID --nats URL: the eval's plan is
// fetched into home unless there, and its results (with their records)
// are collected into home's results.jsonl in the background, which the
// export follows. The returned context ends when collecting fails; stop
// ends the collecting and returns its error.
func followQueued(ctx context.Context, url, home, id string) (context.Context, func() error, error) {
	if isEmbedded(url) {
		return nil, nil, cmdline.Usagef("--nats %s: follow an eval on a running server; pass its URL (e.g. nats://127.0.0.1:4222)", url)
	}
	conn, err := jetstream.Connect(ctx, url, "apodex export", 0)
	if err != nil {
		return nil, nil, cmdline.Usagef("%v", err)
	}
	plan, err := conn.FetchPlan(ctx, home, id)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := conn.CollectEval(cctx, eval.Options{Home: home}, plan); err != nil {
			cancel(err)
		}
	}()
	return cctx, func() error {
		err := context.Cause(cctx)
		cancel(nil)
		<-done
		conn.Close()
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("results of %s not collected from %s: %w", id, url, err)
		}
		return nil
	}, nil
}

// syncQueued is eval show ID --nats URL on a home that may lack the eval:
// the plan is fetched and what the queue holds now is collected.
func syncQueued(ctx context.Context, url, home, id string) error {
	if isEmbedded(url) {
		return nil
	}
	conn, err := jetstream.Connect(ctx, url, "apodex eval show", 0)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	defer conn.Close()
	plan, err := conn.FetchPlan(ctx, home, id)
	if err != nil {
		return err
	}
	_, err = conn.CollectNow(ctx, eval.Options{Home: home}, plan)
	return err
}
