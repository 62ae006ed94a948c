package main

import (
	"context"
	"io"
)

func cmdMCPServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usagef("apodex mcp serve is not built yet")
}
