package evalcmd

import (
	"context"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"io"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
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
	var plan *eval.Plan
	if sub == "resume" {
		plan, err = eval.ReadPlan(opts.Home, arg)
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
	if err := conn.PublishWorlds(ctx, opts.Home, plan); err != nil {
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
	col, err := eval.OpenCollector(opts, plan)
	if err != nil {
		return err
	}
	defer col.Close()
	err = conn.Collect(ctx, opts.Home, plan, col)
	fmt.Fprintf(stdout, "eval %s: %d of %d results in %s/results.jsonl; see `apodex eval show %s`\n", plan.ID, col.Done(), col.Total(), eval.Dir(opts.Home, plan.ID), plan.ID)
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
