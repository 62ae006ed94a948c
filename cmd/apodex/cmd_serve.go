package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/evalcmd"
	"github.com/apodex/apodex/internal/cmdline/livecmd"
	"github.com/apodex/apodex/internal/web"
)

// cmdServe is apodex serve: the HTTP API and the live page over a home.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("serve", "[flags]", stdout, stderr)
	home := fs.HomeFlag()
	addr := fs.String("addr", "127.0.0.1:7777", "where to listen; an address beyond loopback needs --token")
	token := fs.String("token", "", "require this token on every API call (Authorization: Bearer, or the page's cookie); \"generate\" makes one and prints it with the URL")
	natsFlag := fs.String("nats", "", "also list the workers of evals queued on this NATS URL (default $APODEX_NATS_URL, else the config key nats)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.Usagef("serve takes no arguments; see `apodex serve --help`")
	}
	queue, err := evalcmd.ServeQueue(*natsFlag, cmdline.HomeDir(*home))
	if err != nil {
		return err
	}
	if *token == "generate" {
		*token = web.NewToken()
	}
	if !web.IsLoopback(*addr) && *token == "" {
		return cmdline.Usagef("--addr %s is reachable from other machines: give --token T (or --token generate), or listen on 127.0.0.1", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; pick another --addr (port 0 takes a free one)", *addr, err)
	}
	// Without a token, messages and controls still need a secret: a
	// sandboxed command under --network host reaches loopback too.
	key := ""
	if *token == "" {
		key = web.NewToken()
	}
	srv := &http.Server{
		Handler:           web.New(web.Config{Home: cmdline.HomeDir(*home), Token: *token, ControlKey: key, Sender: livecmd.Sender(), Log: slog.New(slog.NewTextHandler(stderr, nil)), Queue: queue}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx }, // streams end with the command
	}
	url := "http://" + ln.Addr().String() + "/?token=" + *token + key
	fmt.Fprintf(stdout, "apodex serve: %s (runs under %s; Ctrl-C stops)\n", url, cmdline.HomeDir(*home))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	srv.Close() // streams do not end by themselves
	return nil
}
