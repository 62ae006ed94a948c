package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/runview"
)

// cmdContinue starts a new segment of a finished run with a follow-up.
func cmdContinue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("continue", `[flags] RUN "follow-up"`, stdout, stderr)
	home := fs.homeFlag()
	var mf modelFlags
	mf.register(fs)
	var out outputFlags
	out.register(fs)
	sbx := sandboxOverride(fs, "continue")
	mcpConfig := fs.mcpConfigFlag()
	budget := fs.String("budget", "", "change budgets for the new segment, one or more KEY=VALUE as with say --budget: turns=+10 tool_calls=+50 tokens=400000 deadline=+10m")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef(`give a run id and the follow-up: apodex continue RUN "now also write the tests"`)
	}
	dir, err := findRun(*home, pos[0])
	if err != nil {
		return err
	}
	followUp := strings.TrimSpace(strings.Join(pos[1:], " "))
	if err := out.check(); err != nil {
		return err
	}
	if err := checkSandboxOverride(*sbx); err != nil {
		return err
	}
	var change map[string]string
	if *budget != "" {
		_, b, _, err := inbox.BudgetArgs(append(strings.Fields(*budget), filepath.Base(dir)))
		if err != nil {
			return usagef("--budget: %v", err)
		}
		change = b
	}
	switch runview.Liveness(dir) {
	case runview.Live:
		return fmt.Errorf("run %s is live: send it the follow-up with apodex say %s %q", filepath.Base(dir), filepath.Base(dir), followUp)
	case runview.Finished:
	default:
		return fmt.Errorf("run %s has not finished: apodex resume %s goes on with it; continue it once it has ended", filepath.Base(dir), filepath.Base(dir))
	}
	return goOn(ctx, dir, *home, *mcpConfig, &mf, &out, *sbx, change, followUp, stdout, stderr)
}
