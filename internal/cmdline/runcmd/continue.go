package runcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/runview"
)

// Continue starts a new segment of a finished run with a follow-up.
func Continue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("continue", `[flags] RUN "follow-up"`, stdout, stderr)
	home := fs.HomeFlag()
	var mf runflags.Model
	mf.Register(fs)
	var out runflags.Output
	out.Register(fs)
	sbx := runflags.SandboxOverride(fs, "continue")
	allow := runflags.NetworkAllowOverride(fs, "continue")
	mcpConfig := runflags.MCPConfigFlag(fs)
	budget := fs.String("budget", "", "change budgets for the new segment, one or more KEY=VALUE as with say --budget: turns=+10 tool_calls=+50 tokens=400000 deadline=+10m")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return cmdline.Usagef(`give a run id and the follow-up: apodex continue RUN "now also write the tests"`)
	}
	dir, err := cmdline.FindRun(*home, pos[0])
	if err != nil {
		return err
	}
	followUp := strings.TrimSpace(strings.Join(pos[1:], " "))
	if err := out.Check(); err != nil {
		return err
	}
	if err := runflags.CheckSandboxOverride(*sbx); err != nil {
		return err
	}
	var change map[string]string
	if *budget != "" {
		_, b, _, err := inbox.BudgetArgs(append(strings.Fields(*budget), filepath.Base(dir)))
		if err != nil {
			return cmdline.Usagef("--budget: %v", err)
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
	return goOn(ctx, dir, *home, *mcpConfig, &mf, &out, *sbx, *allow, change, followUp, stdout, stderr)
}
