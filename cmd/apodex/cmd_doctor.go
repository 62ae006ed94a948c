package main

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/doctor"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/termtext"
)

// cmdDoctor checks the machine and, when a provider is configured (flags,
// env or a config profile), its endpoint. Exit 1 when a check failed.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("doctor", "[flags]   (with --provider/--base-url/--model or --profile: also the endpoint)", stdout, stderr)
	home := fs.HomeFlag()
	var mf runflags.Model
	mf.Register(fs)
	jsonOut := fs.JSONFlag("the checks as a JSON array")
	mcpConfig := runflags.MCPConfigFlag(fs)
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.Usagef("unexpected argument %q", pos[0])
	}
	resolved, err := runflags.ApplyConfig(fs, *home, mf.Profile)
	if err != nil {
		return err
	}
	servers, err := runflags.MCPServers(*home, resolved.Profile, *mcpConfig)
	if err != nil {
		return err
	}
	checks := doctor.SandboxChecks()
	checks = append(checks, doctor.ToolChecks()...)
	checks = append(checks, doctor.HomeCheck(cmdline.HomeDir(*home)))
	checks = append(checks, doctor.ConfiguredEndpoint(ctx, mf.Spec())...)
	checks = append(checks, mcpChecks(ctx, servers)...)
	if *jsonOut {
		cmdline.WriteJSON(stdout, checks)
	} else {
		if progress.Colour(stdout) { // doctor.Render cleans what it colours
			doctor.Render(termtext.Raw(stdout), checks, true)
		} else {
			doctor.Render(stdout, checks, false)
		}
	}
	if doctor.Failed(checks) {
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}
