package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apodex/apodex/internal/doctor"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/transcript"
)

// cmdDoctor checks the machine and, when a provider is configured (flags,
// env or a config profile), its endpoint. Exit 1 when a check failed.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("doctor", "[flags]   (with --provider/--base-url/--model or --profile: also the endpoint)", stdout, stderr)
	home := fs.homeFlag()
	var mf modelFlags
	mf.register(fs)
	jsonOut := fs.jsonFlag("the checks as a JSON array")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if _, err := applyConfig(fs, *home, mf.profile); err != nil {
		return err
	}
	checks := doctor.SandboxChecks()
	checks = append(checks, doctor.ToolChecks()...)
	checks = append(checks, doctor.HomeCheck(homeDir(*home)))
	checks = append(checks, endpointChecks(ctx, mf)...)
	if *jsonOut {
		writeJSON(stdout, checks)
	} else {
		st := transcript.Style{Color: progress.Colour(stdout)}
		for _, c := range checks {
			mark := map[string]string{doctor.OK: st.Paint(transcript.Green, "ok  "), doctor.Warn: st.Paint(transcript.Yellow, "warn"),
				doctor.Fail: st.Paint(transcript.Red, "FAIL"), doctor.Skip: st.Paint(transcript.Dim, "skip")}[c.Status]
			fmt.Fprintf(stdout, "%s  %-8s %s: %s\n", mark, c.Group, c.Name, c.Detail)
			if c.Fix != "" {
				fmt.Fprintf(stdout, "      fix: %s\n", c.Fix)
			}
		}
	}
	if doctor.Failed(checks) {
		return exitError(exitFailed)
	}
	return nil
}

// endpointChecks probes the configured endpoint, if any.
func endpointChecks(ctx context.Context, mf modelFlags) []doctor.Check {
	if mf.provider == "" && os.Getenv("OPENAI_API_KEY") == "" && os.Getenv("ANTHROPIC_API_KEY") == "" {
		return []doctor.Check{{Group: "endpoint", Name: "model endpoint", Status: doctor.Skip,
			Detail: "no provider configured", Fix: "pass --provider openai --base-url URL --model NAME (or --profile NAME) to check one"}}
	}
	if mf.provider == "scripted" {
		return []doctor.Check{{Group: "endpoint", Name: "scripted", Status: doctor.Skip, Detail: "a scripted policy has no endpoint"}}
	}
	model, info, err := mf.build()
	ep := doctor.Endpoint{Provider: info.Provider, BaseURL: info.BaseURL, Model: info.Name, Client: model}
	if err != nil {
		if info.Provider == "openai" && mf.model == "" && info.BaseURL == "" {
			return []doctor.Check{{Group: "endpoint", Name: "configuration", Status: doctor.Fail, Detail: err.Error()}}
		}
		// A local server without --model: still worth listing what it serves.
		ep.BaseURL = firstNonEmpty(mf.baseURL, os.Getenv("OPENAI_BASE_URL"))
		if ep.BaseURL == "" {
			return []doctor.Check{{Group: "endpoint", Name: "configuration", Status: doctor.Fail, Detail: err.Error()}}
		}
		ep.Client = nil
	}
	if info.Provider == "anthropic" {
		ep.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	} else {
		ep.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	return doctor.EndpointChecks(ctx, ep)
}
