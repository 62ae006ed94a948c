package mcp

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Only this package (and its test helpers) imports the MCP SDK: the rest
// of Apodex sees tool.Tool, config.MCPServer and this package's API.
func TestOnlyThisPackageImportsTheSDK(t *testing.T) {
	root := filepath.Join("..", "..")
	own := filepath.Join(root, "internal", "mcp")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == own || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); strings.HasPrefix(p, "github.com/modelcontextprotocol/go-sdk") {
				t.Errorf("%s imports %s: only internal/mcp may", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
