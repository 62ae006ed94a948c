package doctor

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apodex/apodex/internal/llm/provider"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// Render writes checks as `apodex doctor` prints them: a status mark
// (coloured with color), the group, the name and detail, and the fix.
func Render(w io.Writer, checks []Check, color bool) {
	st := transcript.Style{Color: color}
	for _, c := range checks {
		mark := map[string]string{OK: st.Paint(transcript.Green, "ok  "), Warn: st.Paint(transcript.Yellow, "warn"),
			Fail: st.Paint(transcript.Red, "FAIL"), Skip: st.Paint(transcript.Dim, "skip")}[c.Status]
		// An endpoint's reply is in Detail: clean it, as the colours are not.
		fmt.Fprintf(w, "%s  %-8s %s: %s\n", mark, termtext.Clean(c.Group), termtext.Clean(c.Name), termtext.Clean(c.Detail))
		if c.Fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", termtext.Clean(c.Fix))
		}
	}
}

// ConfiguredEndpoint probes the endpoint spec chooses (see provider.Build),
// if any: a skip when no provider is configured or it is scripted, a
// failure when the settings cannot work, else EndpointChecks. A local
// server named without a model is still asked what it serves.
func ConfiguredEndpoint(ctx context.Context, mf provider.Spec) []Check {
	if mf.Provider == "" && os.Getenv("OPENAI_API_KEY") == "" && os.Getenv("ANTHROPIC_API_KEY") == "" {
		return []Check{{Group: "endpoint", Name: "model endpoint", Status: Skip,
			Detail: "no provider configured", Fix: "pass --provider openai --base-url URL --model NAME (or --profile NAME) to check one"}}
	}
	if mf.Provider == "scripted" {
		return []Check{{Group: "endpoint", Name: "scripted", Status: Skip, Detail: "a scripted policy has no endpoint"}}
	}
	model, info, err := provider.Build(mf)
	ep := Endpoint{Provider: info.Provider, BaseURL: info.BaseURL, Model: info.Name, Client: model}
	if err != nil {
		if info.Provider == "openai" && mf.Model == "" && info.BaseURL == "" {
			return []Check{{Group: "endpoint", Name: "configuration", Status: Fail, Detail: err.Error()}}
		}
		// A local server without --model: still worth listing what it serves.
		ep.BaseURL = provider.FirstNonEmpty(mf.BaseURL, os.Getenv("OPENAI_BASE_URL"))
		if ep.BaseURL == "" {
			return []Check{{Group: "endpoint", Name: "configuration", Status: Fail, Detail: err.Error()}}
		}
		ep.Client = nil
	}
	if info.Provider == "anthropic" {
		ep.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	} else {
		ep.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	return EndpointChecks(ctx, ep)
}
