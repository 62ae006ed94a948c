package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
)

type claimsGraph struct {
	RunID  string         `json:"run_id"`
	Claims []claims.Claim `json:"claims"`
}

func cmdClaims(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("claims", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object: every claim with its evidence, artifacts, verdicts, status and load-bearing flag")
	dir, err := fs.OneRun(args, home)
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
		cmdline.WriteJSON(stdout, g)
		return nil
	}
	claims.Render(stdout, g.RunID, g.Claims)
	return nil
}
