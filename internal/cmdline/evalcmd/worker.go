package evalcmd

import (
	"context"
	"fmt"
	"github.com/apodex/apodex/internal/version"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
	"github.com/apodex/apodex/internal/sandbox"
)

// Worker is `apodex worker --nats URL`: it pulls rollouts of queued
// evals and runs them on this machine until stopped (SIGTERM, Ctrl-C).
func Worker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("worker", "--nats URL [--parallel P] [--name N]", stdout, stderr)
	home := fs.HomeFlag()
	natsFlag := fs.String("nats", "", "NATS URL of the queue (default: $APODEX_NATS_URL, else the config key nats)")
	parallel := fs.Int("parallel", 1, "rollouts at once")
	host, _ := os.Hostname()
	name := fs.String("name", fmt.Sprintf("%s-%d", host, os.Getpid()), "this worker's name, as eval show lists it")
	sbx := fs.String("sandbox", sandbox.KindAuto, "auto (bwrap if usable, else native), bwrap, native, or none (no isolation: only with models you trust with this machine)")
	ttl := fs.Duration("lease-ttl", 0, fmt.Sprintf("how long a rollout stays held after its worker's last renewal (the queue's ack wait); every worker of a queue uses the queue's: default the queue's (%s for a new queue); another is refused while the queue has live workers, else it becomes the queue's", jetstream.DefaultLeaseTTL))
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cmdline.Usagef("worker takes no arguments")
	}
	if *parallel < 1 || *ttl != 0 && *ttl < 3*time.Second {
		return cmdline.Usagef("need --parallel ≥ 1 and --lease-ttl ≥ 3s")
	}
	if *sbx != "none" {
		if _, err := sandbox.New(*sbx); err != nil {
			return cmdline.Usagef("--sandbox %s: %v; pass --sandbox auto, or none to run without isolation", *sbx, err)
		}
	}
	h := cmdline.HomeDir(*home)
	url, err := natsURL(*natsFlag, h)
	if err != nil {
		return err
	}
	if url == "" {
		return cmdline.Usagef("no NATS URL: pass --nats URL, set APODEX_NATS_URL, or nats = \"URL\" in config.toml")
	}
	if isEmbedded(url) {
		return cmdline.Usagef("a worker connects to a running server: pass the URL `apodex eval --nats embedded` printed (e.g. nats://127.0.0.1:4222)")
	}
	conn, err := jetstream.Connect(ctx, url, "apodex worker "+*name, *ttl)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	defer conn.Close()
	fmt.Fprintf(stderr, "worker %s: pulling rollouts from %s, %d at once, lease TTL %s; stop with Ctrl-C or SIGTERM (what it holds is handed back)\n", *name, url, *parallel, conn.LeaseTTL)
	w := &jetstream.Worker{Conn: conn, Name: *name, Parallel: *parallel, Version: version.Runtime, Progress: stderr,
		Log:     slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Options: eval.Options{Home: h, Sandbox: *sbx, NewModel: evalModel}}
	return w.Run(ctx)
}

// natsURL is --nats, else $APODEX_NATS_URL, else the config key nats;
// "" for none.
func natsURL(flagValue, home string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var files []config.File
	for _, p := range config.Paths(home, os.Getenv) {
		f, err := config.Load(p)
		if err != nil {
			return "", cmdline.Usagef("%v", err)
		}
		files = append(files, f)
	}
	r, err := config.Resolve(config.Input{Files: files, Getenv: os.Getenv})
	if err != nil {
		return "", cmdline.Usagef("%v", err)
	}
	if v := r.Values["nats"].Value; v != "" {
		return v, nil
	}
	return "", nil
}

func isEmbedded(url string) bool { return url == "embedded" || strings.HasPrefix(url, "embedded:") }

// dialNATS connects to url; "embedded" (port 4222) or "embedded:PORT"
// first starts a server in this process, its store in <home>/nats. The
// server, if any, is stopped by the returned stop.
func dialNATS(ctx context.Context, url, home, name string) (*jetstream.Conn, func(), error) {
	var srv *jetstream.Server
	if isEmbedded(url) {
		port := 4222
		if _, p, ok := strings.Cut(url, ":"); ok {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return nil, nil, cmdline.Usagef("--nats %s: the port must be a number from 1 to 65535", url)
			}
			port = n
		}
		var err error
		srv, err = jetstream.Embedded(jetstream.ServerConfig{StoreDir: filepath.Join(home, "nats"), Port: port})
		if err != nil {
			return nil, nil, cmdline.Usagef("%v", err)
		}
		url = srv.URL()
	}
	conn, err := jetstream.Connect(ctx, url, name, 0)
	if err != nil {
		if srv != nil {
			srv.Shutdown()
		}
		return nil, nil, cmdline.Usagef("%v", err)
	}
	return conn, func() {
		conn.Close()
		if srv != nil {
			srv.Shutdown()
		}
	}, nil
}
