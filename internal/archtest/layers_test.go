package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the layer table in docs/architecture.md")

// module is the module's path; packages below are named relative to it.
const module = "github.com/apodex/apodex"

// layer is one row of the import rule: its packages may import only the
// packages of the layers it names (itself included only when named).
type layer struct {
	name    string
	what    string   // what belongs here, for docs/architecture.md
	pkgs    []string // relative to the module
	imports []string // layer names
}

// layers is the rule, bottom first. Every package of the module is in
// exactly one layer; a new package fails TestLayers until it is placed.
var layers = []layer{
	{"base", "leaves, importing nothing of the module but each other: the clock, host file access and change notification, sizes, terminal text, the version",
		[]string{"internal/clock", "internal/hostfs", "internal/watch", "internal/termtext", "internal/procmem", "internal/runlog",
			"internal/readable", "internal/bytesize", "internal/version", "internal/config", "internal/world/gen", "internal/world/filelist", "internal/sandbox/etccopy"},
		[]string{"base"}},
	{"core", "the vocabulary every layer above speaks: messages and the model interface, the record and its event types, the event log file under it",
		[]string{"internal/llm", "internal/record", "internal/record/eventlog"},
		[]string{"base", "core"}},
	{"model", "a run's state and where it lives: the contract, the planes and worktrees, a finished run's files as it left them, the board, the claim ledger, evidence, W_t, the one projection, the transcript; no sandbox, no model calls",
		[]string{"internal/contract", "internal/contract/check", "internal/workspace", "internal/worktree", "internal/board", "internal/claims", "internal/checkpoint",
			"internal/evidence", "internal/inbox", "internal/state", "internal/runstate", "internal/transcript", "internal/runfiles"},
		[]string{"base", "core", "model"}},
	{"adapters", "one package per outside system, knowing nothing of agents or runs: the sandbox, the model clients, the search index, the web fetcher, OpenTelemetry",
		[]string{"internal/sandbox", "internal/sandbox/spec", "internal/sandbox/command", "internal/sandbox/limits", "internal/sandbox/netns",
			"internal/sandbox/bwrap", "internal/sandbox/native", "internal/sandbox/live", "internal/sandbox/live/server", "internal/sandbox/sandboxtest",
			"internal/corpus", "internal/fetch", "internal/otel",
			"internal/llm/openai", "internal/llm/anthropic", "internal/llm/scripted", "internal/llm/llmtest", "internal/llm/llmtest/strict", "internal/llm/provider"},
		[]string{"base", "core", "adapters"}},
	{"services", "what works on a run directory or a world without running an agent: the task kept in the run, verification, worlds, the read models, grading",
		[]string{"internal/taskstore", "internal/verify", "internal/world", "internal/runview", "internal/trajectory", "internal/grade", "internal/replay/divergence", "internal/repo"},
		[]string{"base", "core", "model", "adapters", "services"}},
	{"engine", "the machinery a run assembles: tools, the agent loop, the publication plane, claim verification and effort, synthesis, the team, live control, and the harness that tests them",
		[]string{"internal/tool", "internal/tool/builtin", "internal/agent", "internal/publish", "internal/verify/claim", "internal/synth", "internal/team", "internal/live", "internal/runtest", "internal/mcp", "internal/mcp/mcptest"},
		[]string{"base", "core", "model", "adapters", "services", "engine"}},
	{"runparts", "the parts package run assembles one run from, each imported by run alone: its staging (the run directory, inputs, corpus, --repo), its evidence plane, its final gate (check_deliverables, the repair turn, the verdict, apodex verify)",
		[]string{"internal/run/stage", "internal/run/evidenceplane", "internal/run/gate"},
		[]string{"base", "core", "model", "adapters", "services", "engine", "runparts"}},
	{"run", "assembling, executing and resuming one run",
		[]string{"internal/run"},
		[]string{"base", "core", "model", "adapters", "services", "engine", "runparts"}},
	{"readers", "what reads runs, live or finished, and never executes one: the web server, exports, doctor, live progress",
		[]string{"internal/web", "internal/trajectory/export", "internal/trajectory/atiftest", "internal/doctor", "internal/progress"},
		[]string{"base", "core", "model", "adapters", "services"}},
	{"drivers", "what executes runs through package run alone: replay, evaluation suites",
		[]string{"internal/replay", "internal/eval", "internal/eval/chart", "internal/jetstream"},
		[]string{"base", "core", "model", "adapters", "services", "run", "drivers"}},
	{"cli", "the command line's parts: the frame every command stands in (flags, usage errors, exit codes), the run flags bound into run.Settings, shell completion, the MCP server of apodex mcp serve, and the commands grouped by what they work on (evaluation, live runs, starting runs, a finished run's tree)",
		[]string{"internal/cmdline", "internal/cmdline/runflags", "internal/cmdline/complete", "internal/cmdline/evalcmd", "internal/cmdline/livecmd", "internal/cmdline/runcmd", "internal/cmdline/treecmd", "internal/mcp/serve"},
		[]string{"base", "core", "model", "adapters", "services", "engine", "run", "readers", "drivers", "cli"}},
	{"cmd", "the binary, and the packages that test the whole module",
		[]string{"cmd/apodex", "internal/crashtest", "internal/archtest"},
		[]string{"base", "core", "model", "adapters", "services", "engine", "run", "readers", "drivers", "cli"}},
}

// outside names, per outside module, the only packages that may import it
// (one adapter package per dependency).
var outside = []struct {
	module string
	pkgs   []string
}{
	{"github.com/BurntSushi/toml", []string{"internal/config"}},
	{"github.com/blevesearch/bleve/v2", []string{"internal/corpus"}},
	{"github.com/santhosh-tekuri/jsonschema/v6", []string{"internal/contract", "internal/contract/check", "internal/llm/llmtest/strict", "internal/mcp"}},
	{"github.com/modelcontextprotocol/go-sdk", []string{"internal/mcp", "internal/mcp/mcptest"}},
	{"gonum.org/v1/plot", []string{"internal/eval/chart"}},
	{"github.com/nats-io/nats.go", []string{"internal/jetstream"}},
	{"github.com/nats-io/nats-server/v2", []string{"internal/jetstream"}},
	{"go.yaml.in/yaml/v3", []string{"internal/contract", "internal/contract/check", "internal/world", "internal/world/gen", "internal/eval"}},
	{"go.opentelemetry.io/otel", []string{"internal/otel"}},
	{"codeberg.org/readeck/go-readability/v2", []string{"internal/readable"}},
	{"golang.org/x/net", []string{"internal/readable"}},
	{"golang.org/x/sys", []string{"internal/hostfs", "internal/sandbox/limits", "internal/sandbox/netns", "internal/sandbox/native", "internal/sandbox/live/server", "internal/watch", "internal/world", "internal/worktree"}},
}

// importGraph is every package of the module with its imports (not its
// tests'), as go list reports them: module packages relative to the
// module, the rest as they are.
func importGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for i := range f {
			if rel, ok := strings.CutPrefix(f[i], module+"/"); ok {
				f[i] = rel
			}
		}
		g[f[0]] = f[1:]
	}
	return g
}

// ours reports whether path (relative, as importGraph gives it) is a
// package of the module.
func ours(path string) bool {
	return strings.HasPrefix(path, "internal/") || strings.HasPrefix(path, "cmd/")
}

// standard reports whether path is a standard library package: its first
// element has no dot.
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// violations returns, sorted, every import of g the layers and the outside
// table do not allow, and every package of g no layer places.
func violations(g map[string][]string) []string {
	layerOf := map[string]*layer{}
	for i := range layers {
		for _, p := range layers[i].pkgs {
			layerOf[p] = &layers[i]
		}
	}
	var out []string
	for pkg, imports := range g {
		l := layerOf[pkg]
		if l == nil {
			out = append(out, fmt.Sprintf("%s is in no layer: add it to a layer of internal/archtest/layers_test.go (go test ./internal/archtest -update then rewrites docs/architecture.md)", pkg))
			continue
		}
		for _, imp := range imports {
			switch to := layerOf[imp]; {
			case to != nil:
				if !slices.Contains(l.imports, to.name) {
					out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): %s may import only %s; move what it needs down, or let it own a small interface the caller fills",
						pkg, l.name, imp, to.name, l.name, strings.Join(l.imports, ", ")))
				}
			case ours(imp):
				out = append(out, fmt.Sprintf("%s imports %s, which is in no layer", pkg, imp))
			case standard(imp):
			default:
				if !outsideAllowed(pkg, imp) {
					out = append(out, fmt.Sprintf("%s imports %s: only the packages internal/archtest's outside table names may import that module", pkg, imp))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// outsideAllowed reports whether pkg may import imp of an outside module.
func outsideAllowed(pkg, imp string) bool {
	for _, o := range outside {
		if imp == o.module || strings.HasPrefix(imp, o.module+"/") {
			return slices.Contains(o.pkgs, pkg)
		}
	}
	return false
}

// TestLayers fails on any import of the module's packages that the layers
// or the outside table do not allow, on a package in no layer and on a
// layer naming a package that does not exist.
func TestLayers(t *testing.T) {
	g := importGraph(t, moduleRoot(t))
	if len(g) < 40 {
		t.Fatalf("go list gave %d packages; the graph is broken", len(g))
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if _, ok := g[p]; !ok {
				t.Errorf("layer %s names %s, which is not a package of the module", l.name, p)
			}
		}
	}
	for _, v := range violations(g) {
		t.Error(v)
	}
}

// TestViolations: the rule catches a crossing import, an unplaced package
// and an outside module imported by the wrong package, and lets the
// allowed ones through.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    map[string][]string
		want []string // substrings, one per violation
	}{
		{"allowed", map[string][]string{"internal/record": {"internal/llm", "internal/hostfs", "fmt"}, "internal/corpus": {"github.com/blevesearch/bleve/v2/mapping"}}, nil},
		{"model imports an adapter", map[string][]string{"internal/contract": {"internal/sandbox"}}, []string{"internal/contract (model) imports internal/sandbox (adapters)"}},
		{"reader imports run", map[string][]string{"internal/web": {"internal/run"}}, []string{"internal/web (readers) imports internal/run (run)"}},
		{"driver imports the engine", map[string][]string{"internal/replay": {"internal/team"}}, []string{"internal/replay (drivers) imports internal/team (engine)"}},
		{"a leaf imports upward", map[string][]string{"internal/clock": {"internal/record"}}, []string{"internal/clock (base) imports internal/record (core)"}},
		{"unplaced package", map[string][]string{"internal/util": {"fmt"}}, []string{"internal/util is in no layer"}},
		{"import of an unplaced package", map[string][]string{"internal/run": {"internal/util"}}, []string{"internal/run imports internal/util, which is in no layer"}},
		{"outside module elsewhere", map[string][]string{"internal/agent": {"github.com/blevesearch/bleve/v2"}}, []string{"internal/agent imports github.com/blevesearch/bleve/v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(tc.g)
			if len(got) != len(tc.want) {
				t.Fatalf("violations = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %q does not say %q", got[i], w)
				}
			}
		})
	}
}

// Markers around the generated layer table in docs/architecture.md.
const (
	tableBegin = "<!-- layers: generated by go test ./internal/archtest -update; edit layers_test.go -->\n"
	tableEnd   = "<!-- end of layers -->\n"
)

// layerTable renders layers as docs/architecture.md shows them, top first.
func layerTable() string {
	var b strings.Builder
	b.WriteString("| layer | packages | may import |\n|---|---|---|\n")
	for _, l := range slices.Backward(layers) {
		var pkgs []string
		for _, p := range l.pkgs {
			pkgs = append(pkgs, "`"+strings.TrimPrefix(p, "internal/")+"`")
		}
		fmt.Fprintf(&b, "| **%s**: %s | %s | %s |\n", l.name, l.what, strings.Join(pkgs, " "), strings.Join(l.imports, ", "))
	}
	b.WriteString("\n| outside module | only in |\n|---|---|\n")
	for _, o := range outside {
		fmt.Fprintf(&b, "| `%s` | %s |\n", o.module, strings.Join(o.pkgs, ", "))
	}
	return b.String()
}

// TestDocLayers: docs/architecture.md shows the layers this test enforces.
// With -update it rewrites the table between the markers.
func TestDocLayers(t *testing.T) {
	path := filepath.Join(moduleRoot(t), archDoc)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no layer table between %q and %q", archDoc, tableBegin, tableEnd)
	}
	want := s[:i] + tableBegin + layerTable() + s[j:]
	if want == s {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's layer table differs from internal/archtest's layers: run go test ./internal/archtest -update", archDoc)
}
