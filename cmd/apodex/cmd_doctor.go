package main

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/doctor"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/termtext"
)

// cmdDoctor checks the machine and, when a provider is configured (flags,
// env or a config profile), its endpoint. Exit 1 when a check failed.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("doctor", "[flags]   (with --provider/--base-url/--model or --profile: also the endpoint)", stdout, stderr)
	home := fs.homeFlag()
	var mf modelFlags
	mf.register(fs)
	jsonOut := fs.jsonFlag("the checks as a JSON array")
	mcpConfig := fs.mcpConfigFlag()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	resolved, err := applyConfig(fs, *home, mf.profile)
	if err != nil {
		return err
	}
	servers, err := mcpServers(*home, resolved.Profile, *mcpConfig)
	if err != nil {
		return err
	}
	checks := doctor.SandboxChecks()
	checks = append(checks, doctor.ToolChecks()...)
	checks = append(checks, doctor.HomeCheck(homeDir(*home)))
	checks = append(checks, doctor.ConfiguredEndpoint(ctx, mf.spec())...)
	checks = append(checks, mcpChecks(ctx, servers)...)
	if *jsonOut {
		writeJSON(stdout, checks)
	} else {
		if progress.Colour(stdout) { // doctor.Render cleans what it colours
			doctor.Render(termtext.Raw(stdout), checks, true)
		} else {
			doctor.Render(stdout, checks, false)
		}
	}
	if doctor.Failed(checks) {
		return exitError(exitFailed)
	}
	return nil
}
