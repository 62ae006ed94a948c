package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/mcp/mcptest"
)

// TestMain lets the test binary be, when asked by its environment, an MCP
// server for the MCP tests (mcptest.Main) or the apodex CLI itself (the
// signal tests' child, apodex mcp serve over stdio); otherwise it runs the
// tests and removes the server binary they built.
func TestMain(m *testing.M) {
	mcptest.Main()
	if os.Getenv("APODEX_TEST_AS_CLI") == "1" || os.Getenv("APODEX_TEST_CLI") == "1" {
		main()
	}
	code := m.Run()
	if mcpBin != "" {
		os.RemoveAll(filepath.Dir(mcpBin))
	}
	os.Exit(code)
}
