package sandbox_test

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/apodex/apodex/internal/sandbox"
)

// A long-lived server speaks over its stdio (Spec.Stdin, Spec.Stdout) in
// every backend, live sandboxes included (they run it per command): lines
// go both ways while it runs, it ends when its stdin closes, its stderr is
// captured, and cancelling ctx kills it.
func TestStdioServer(t *testing.T) {
	rs := sandboxes(t)
	rs["none"] = None{}
	for name, r := range rs {
		t.Run(name, func(t *testing.T) {
			inR, inW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			defer inW.Close()
			defer outR.Close()
			type out struct {
				res Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := r.Run(context.Background(), Spec{
					Command: `while IFS= read -r l; do echo "got $l"; done; echo bye >&2`,
					Stdin:   inR, Stdout: outW, Timeout: time.Minute,
				})
				inR.Close()
				outW.Close()
				done <- out{res, err}
			}()
			lines := bufio.NewScanner(outR)
			for _, msg := range []string{"hello", `{"jsonrpc":"2.0"}`} {
				if _, err := inW.WriteString(msg + "\n"); err != nil {
					t.Fatal(err)
				}
				if !lines.Scan() || lines.Text() != "got "+msg {
					t.Fatalf("read %q (%v)", lines.Text(), lines.Err())
				}
			}
			inW.Close()
			o := <-done
			if o.err != nil || o.res.ExitCode != 0 || strings.TrimSpace(string(o.res.Stderr)) != "bye" || len(o.res.Stdout) != 0 {
				t.Fatalf("after stdin closed: %+v %v (stderr %q)", o.res, o.err, o.res.Stderr)
			}
			if lines.Scan() {
				t.Fatalf("more output after the end: %q", lines.Text())
			}
		})
	}
}

func TestStdioServerCancelled(t *testing.T) {
	for name, r := range sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			inR, inW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			defer inW.Close()
			defer outR.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan Result, 1)
			go func() {
				res, _ := r.Run(ctx, Spec{Command: "echo ready; cat", Stdin: inR, Stdout: outW})
				inR.Close()
				outW.Close()
				done <- res
			}()
			if l, _ := bufio.NewReader(outR).ReadString('\n'); l != "ready\n" {
				t.Fatalf("read %q", l)
			}
			cancel()
			select {
			case res := <-done:
				if res.ExitCode != -1 {
					t.Fatalf("cancelled: %+v", res)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a cancelled server still runs")
			}
		})
	}
}
