package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
)

type claimsGraph struct {
	RunID  string         `json:"run_id"`
	Claims []claims.Claim `json:"claims"`
}

func cmdClaims(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("claims", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object: every claim with its evidence, artifacts, verdicts, status and load-bearing flag")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	c, err := record.Read(dir)
	if err != nil {
		return err
	}
	g := claimsGraph{RunID: filepath.Base(dir), Claims: claims.Fold(c.Events).Claims}
	if g.Claims == nil {
		g.Claims = []claims.Claim{}
	}
	if *jsonOut {
		writeJSON(stdout, g)
		return nil
	}
	if len(g.Claims) == 0 {
		fmt.Fprintf(stdout, "run %s holds no claims (claims come from subagents' reports in team mode)\n", g.RunID)
		return nil
	}
	for _, k := range g.Claims {
		lb := ""
		if k.LoadBearing {
			lb = " load-bearing (" + strings.Join(k.Bears, ", ") + ")"
		}
		fmt.Fprintf(stdout, "%-4s %-12s%s  %s [%s on %s]\n", k.ID, k.Status, lb, k.Text, k.StatedBy, orDash(k.Item))
		fmt.Fprintf(stdout, "     why: %s\n", k.Why)
		if len(k.Evidence) > 0 {
			fmt.Fprintf(stdout, "     evidence: %s\n", strings.Join(k.Evidence, ", "))
		}
		if len(k.Artifacts) > 0 {
			fmt.Fprintf(stdout, "     artifacts: %s\n", strings.Join(k.Artifacts, ", "))
		}
		for _, v := range k.Verdicts {
			fmt.Fprintf(stdout, "     verdict: %s", v.Verdict)
			if v.Location != "" {
				fmt.Fprintf(stdout, " at %s", v.Location)
			}
			if len(v.Checks) > 0 {
				fmt.Fprintf(stdout, " (checks: %s)", strings.Join(v.Checks, "; "))
			}
			fmt.Fprintln(stdout)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
