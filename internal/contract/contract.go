// Package contract reads a task contract (task.yaml): the objective, the
// inputs, the budget, the deliverables under /outputs and the verification
// clauses that decide whether a run succeeded (SPEC §1, R-CONTRACT).
//
// Guarantees:
//   - Parse and Load are strict: an unknown key, a wrong type, a bad path, a
//     missing file or directory, an invalid JSON schema, a negative number or
//     a contradiction between fields is rejected before any run starts. Every
//     problem found (up to a limit) is reported as an *Error carrying the task
//     file's name and line, and saying what to change.
//   - A returned *Contract is consistent: every deliverable is a clean path
//     of a regular file under /outputs and outside /outputs/scratch, paths
//     are unique and never nest; every recompute clause compares a declared
//     deliverable; every referenced host file or directory existed when the
//     contract was loaded, and a verifier's files directory is never inside
//     the inputs directory (which the agent sees).
//   - Relative paths are resolved against the task file's directory, and
//     every host path (inputs, corpus, a clause's files, a json_schema and
//     the files its $ref names) must lie inside that directory, symbolic
//     links resolved: one outside it, or a link leading out, is refused
//     naming the key, the path and OutsideFlag, unless Options.AllowOutside.
//   - The raw user text U0, the objective as written in the file and the
//     normalized Objective are kept apart (R-CONTRACT-3); Hash is a sha256 of
//     the canonical JSON (MarshalJSON), which covers the content of every
//     JSON schema and verifier files directory, so a changed test changes
//     the hash. Host locations are not part of it: the same task in another
//     directory hashes the same.
//   - Parse never panics, whatever its input.
package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Verification clause kinds (R-VERIFY-2).
const (
	KindTests     = "tests"     // passes iff the command exits 0
	KindRecompute = "recompute" // passes iff the command's stdout equals a deliverable
	// KindSourceAlignment passes iff every [E12] citation in its files
	// cites known evidence and every quote it carries is in that evidence.
	KindSourceAlignment = "source_alignment"
)

// Caps on a task (issue 11, W7): past them Parse and Load fail with an
// error naming the cap and how to change it.
const (
	// MaxTaskFile bounds the size of a task file; it is fixed: large data
	// belongs in the inputs directory.
	MaxTaskFile = 1 << 20
	// DefaultMaxDeliverables bounds the deliverables of one contract unless
	// the task file raises it with `limits: {deliverables: N}`, up to
	// HardMaxDeliverables. Every turn checks every deliverable; 30,000 took
	// 53 s a turn.
	DefaultMaxDeliverables = 1000
	HardMaxDeliverables    = 10000
	// MaxMustPass bounds the test ids of one clause's must_pass.
	MaxMustPass = 10000
)

const maxTaskFile = MaxTaskFile

// Report formats of a tests clause (Clause.Report).
const (
	ReportPytest   = "pytest"   // pytest's -rA or -v output: "PASSED id" / "id PASSED"
	ReportUnittest = "unittest" // unittest's -v output: "name (id) ... ok"
	ReportJUnit    = "junit:"   // junit:/report/FILE, a JUnit XML file the command writes
	// ReportDir is the writable directory a clause's command writes its
	// JUnit report into; it is empty when the command starts and discarded
	// after the verdict.
	ReportDir = "/report"
)

// Contract is one task. The zero value is a task with no objective, no
// budget, no deliverables and no clauses.
type Contract struct {
	// File is the task file's absolute path; empty when the contract came
	// from the command line only.
	File string
	// BaseDir is the directory relative paths were resolved against.
	BaseDir string

	// U0 is the objective exactly as typed on the command line, if it was.
	U0 string
	// FileObjective is the objective exactly as written in the task file.
	FileObjective string
	// Objective is the normalized objective the agent works on: U0's when
	// given, else the file's (see NormalizeObjective).
	Objective string

	// Inputs is the host directory mounted read-only at /inputs; empty for
	// none. InputsSpec is the value as written in the file.
	Inputs     string
	InputsSpec string
	// Corpus is the host directory of documents searched at
	// /inputs/corpus (R-SEARCH-1); CorpusSpec is the value as written.
	Corpus, CorpusSpec string

	Budget Budget
	// MCP names the configured MCP servers whose tools the task's agents
	// get (`mcp: [NAME, …]`); whether each is configured is the caller's
	// to check.
	MCP          []string
	Deliverables []Deliverable
	Verify       []Clause
	// MaxDeliverables is the cap in force: DefaultMaxDeliverables or the
	// task file's limits.deliverables. It also bounds a claimed manifest.
	MaxDeliverables int
}

// DeliverableCap is the deliverables cap of c (the default for nil or a
// contract from flags).
func (c *Contract) DeliverableCap() int {
	if c == nil || c.MaxDeliverables == 0 {
		return DefaultMaxDeliverables
	}
	return c.MaxDeliverables
}

// Budget bounds a run (R-CONTRACT-1). A zero field is unset.
type Budget struct {
	Turns        int
	ToolCalls    int
	Tokens       int
	SoftDeadline time.Duration
	Timeout      time.Duration
	Concurrency  int
	// Sandbox limits per command (bytes; processes): mem_limit,
	// pids_limit, tmp_size, workspace_quota; sizes take units (256MiB).
	MemLimit, PidsLimit, TmpSize, WorkspaceQuota int64
}

// Deliverable is one required file under /outputs and its constraints
// (R-CONTRACT-2). A zero constraint is unset.
type Deliverable struct {
	Path     string   // /outputs/...
	NonEmpty bool     // at least one byte that is not whitespace
	Ext      []string // lower case, with the dot; Path ends in one of them
	// JSONSchema is the host path of the schema the file must satisfy;
	// JSONSchemaSpec is the value as written in the file.
	JSONSchema     string
	JSONSchemaSpec string
	CSVColumns     []string // the header row contains each, in any order
	MinBytes       int64
	MaxBytes       int64
	NotEqualInput  string // /inputs/...: the file must differ from it
	// Kind is KindReport (a report a writer writes from the claim graph
	// in team synthesis), KindFile (never synthesized), or "" (a report
	// when it is a .md file); see IsReport.
	Kind string
	Line int // where it was declared in the task file

	schema    *jsonschema.Schema
	schemaRaw []byte
}

// Schema is the compiled schema of JSONSchema, or a message saying why it
// cannot be loaded; a deliverable built by hand, not parsed, has its schema
// loaded here.
func (d Deliverable) Schema() (*jsonschema.Schema, string) {
	if d.schema != nil {
		return d.schema, ""
	}
	_, sch, msg := loadSchema(d.JSONSchema, jsonschema.SchemeURLLoader{"file": jsonschema.FileLoader{}})
	return sch, msg
}

// MatchedExt is the longest of Ext that Path ends in (lower case), the
// extension content checks judge the file by.
func (d Deliverable) MatchedExt() string { return matchExt(d.Path, d.Ext) }

// Deliverable kinds (Deliverable.Kind).
const (
	KindReport = "report"
	KindFile   = "file"
)

// IsReport says whether a writer writes the deliverable in synthesis: kind
// report, or no kind and a .md path.
func (d Deliverable) IsReport() bool {
	switch d.Kind {
	case KindReport:
		return true
	case KindFile:
		return false
	}
	return strings.EqualFold(path.Ext(d.Path), ".md")
}

// Clause is one executable verification clause.
type Clause struct {
	Index   int    // position in the task file's verify list, from 0
	Name    string // optional, for messages
	Kind    string // KindTests or KindRecompute
	Command string // run by /bin/sh -c in the verifier's sandbox
	// Files is the host directory mounted read-only at /tests for this
	// clause only; FilesSpec is the value as written in the file.
	Files     string
	FilesSpec string
	// Compare is the deliverable a recompute's stdout must equal.
	Compare string
	// Tolerance, when set, compares a recompute numerically.
	Tolerance *float64
	// Timeout overrides the verifier's default per-clause timeout.
	Timeout time.Duration
	// Outputs are the deliverables a source_alignment clause checks, and
	// MinCitations how many citations they must carry at least.
	Outputs      []string
	MinCitations int
	// MustPass lists test ids a tests clause passes only if its Report
	// shows every one of them passed (then the exit status alone does not
	// decide). Report is ReportPytest, ReportUnittest or ReportJUnit+path.
	MustPass []string
	Report   string
	Line     int
	// Dimensions, Sees and JudgeModel configure a rubric (rubric.go).
	Dimensions []Dimension
	Sees       string
	JudgeModel string

	filesDigest string
}

// Label names the clause in messages: its name, else its position and kind.
func (c Clause) Label() string {
	if c.Name != "" {
		return fmt.Sprintf("verify[%d] %q (%s)", c.Index, c.Name, c.Kind)
	}
	return fmt.Sprintf("verify[%d] (%s)", c.Index, c.Kind)
}

// Error is one problem in a task file.
type Error struct {
	File string
	Line int // 0 when the problem has no line (an unreadable file)
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Load reads and parses the task file at path; relative paths in it are
// resolved against its directory and must stay inside it (LoadWith with
// the zero Options). Errors name path as given.
func Load(path string) (*Contract, error) { return LoadWith(path, Options{}) }

// LoadWith is Load with options.
func LoadWith(path string, opt Options) (*Contract, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read the task file: %v", err)}
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxTaskFile+1)); err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read the task file: %v", err)}
	}
	c, err := parse(path, buf.Bytes(), filepath.Dir(abs), opt)
	if err != nil {
		return nil, err
	}
	c.File = abs
	return c, nil
}

// Parse parses a task file's content; baseDir resolves relative paths,
// and every host path must stay inside it. Errors are reported against the
// name "task.yaml".
func Parse(data []byte, baseDir string) (*Contract, error) {
	return ParseWith(data, baseDir, Options{})
}

// ParseWith is Parse with options.
func ParseWith(data []byte, baseDir string, opt Options) (*Contract, error) {
	return parse("task.yaml", data, baseDir, opt)
}

// FromObjective is the contract of a task given only on the command line.
func FromObjective(u0 string) *Contract {
	c := &Contract{}
	c.SetObjective(u0)
	return c
}

// SetObjective makes u0, as typed by the user, the objective, overriding
// the file's (which stays in FileObjective).
func (c *Contract) SetObjective(u0 string) {
	c.U0 = u0
	c.Objective = NormalizeObjective(u0)
}

// RequireObjective reports a contract without an objective.
func (c *Contract) RequireObjective() error {
	if c.Objective != "" {
		return nil
	}
	if c.File != "" {
		return &Error{File: c.File, Msg: "no objective: add `objective: ...` to the task file or give the objective on the command line"}
	}
	return fmt.Errorf("contract: no objective: give one on the command line or in a task file")
}

// NormalizeObjective turns user text into the objective q: line endings
// become \n, control characters are dropped, runs of spaces and tabs become
// one space, lines are trimmed, runs of blank lines become one, and the
// text is trimmed. Paragraphs and list lines survive; indentation does not.
func NormalizeObjective(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// Hash is "sha256:" and the hex sha256 of MarshalJSON's output.
func (c *Contract) Hash() string {
	b, _ := c.MarshalJSON() // cannot fail: plain strings and numbers
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// The canonical JSON form; field order is fixed by these structs.
type (
	wireContract struct {
		U0            string            `json:"u0,omitempty"`
		FileObjective string            `json:"file_objective,omitempty"`
		Objective     string            `json:"objective"`
		Inputs        string            `json:"inputs,omitempty"`
		Corpus        string            `json:"corpus,omitempty"`
		Budget        wireBudget        `json:"budget"`
		MCP           []string          `json:"mcp,omitempty"`
		Deliverables  []wireDeliverable `json:"deliverables"`
		Verify        []wireClause      `json:"verify"`
		Limits        *wireLimits       `json:"limits,omitempty"`
	}
	wireLimits struct {
		Deliverables int `json:"deliverables,omitempty"`
	}
	wireBudget struct {
		Turns        int    `json:"turns,omitempty"`
		ToolCalls    int    `json:"tool_calls,omitempty"`
		Tokens       int    `json:"tokens,omitempty"`
		SoftDeadline string `json:"soft_deadline,omitempty"`
		Timeout      string `json:"timeout,omitempty"`
		Concurrency  int    `json:"concurrency,omitempty"`
		MemLimit     int64  `json:"mem_limit,omitempty"`
		PidsLimit    int64  `json:"pids_limit,omitempty"`
		TmpSize      int64  `json:"tmp_size,omitempty"`
		Workspace    int64  `json:"workspace_quota,omitempty"`
	}
	wireDeliverable struct {
		Path             string   `json:"path"`
		Kind             string   `json:"kind,omitempty"`
		NonEmpty         bool     `json:"non_empty,omitempty"`
		Ext              []string `json:"ext,omitempty"`
		JSONSchema       string   `json:"json_schema,omitempty"`
		JSONSchemaSHA256 string   `json:"json_schema_sha256,omitempty"`
		CSVColumns       []string `json:"csv_columns,omitempty"`
		MinBytes         int64    `json:"min_bytes,omitempty"`
		MaxBytes         int64    `json:"max_bytes,omitempty"`
		NotEqualInput    string   `json:"not_equal_input,omitempty"`
	}
	wireClause struct {
		Kind        string      `json:"kind"`
		Name        string      `json:"name,omitempty"`
		Command     string      `json:"command"`
		Files       string      `json:"files,omitempty"`
		FilesSHA256 string      `json:"files_sha256,omitempty"`
		Compare     string      `json:"compare,omitempty"`
		Tolerance   *float64    `json:"tolerance,omitempty"`
		Timeout     string      `json:"timeout,omitempty"`
		Outputs     []string    `json:"outputs,omitempty"`
		MinCites    int         `json:"min_citations,omitempty"`
		MustPass    []string    `json:"must_pass,omitempty"`
		Report      string      `json:"report,omitempty"`
		Dimensions  []Dimension `json:"dimensions,omitempty"`
		Sees        string      `json:"sees,omitempty"`
		JudgeModel  string      `json:"judge_model,omitempty"`
	}
)

// MarshalJSON is the contract's canonical JSON, for the record (marshal a
// *Contract): the values as written in the task file, the objectives, and
// the sha256 of each JSON schema and verifier files directory.
func (c *Contract) MarshalJSON() ([]byte, error) {
	w := wireContract{
		U0: c.U0, FileObjective: c.FileObjective, Objective: c.Objective,
		Inputs: c.InputsSpec, Corpus: c.CorpusSpec,
		Budget: wireBudget{
			Turns: c.Budget.Turns, ToolCalls: c.Budget.ToolCalls, Tokens: c.Budget.Tokens,
			SoftDeadline: durString(c.Budget.SoftDeadline), Timeout: durString(c.Budget.Timeout),
			Concurrency: c.Budget.Concurrency,
			MemLimit:    c.Budget.MemLimit, PidsLimit: c.Budget.PidsLimit, TmpSize: c.Budget.TmpSize, Workspace: c.Budget.WorkspaceQuota,
		},
		MCP:          c.MCP,
		Deliverables: []wireDeliverable{},
		Verify:       []wireClause{},
	}
	for _, d := range c.Deliverables {
		wd := wireDeliverable{
			Path: d.Path, Kind: d.Kind, NonEmpty: d.NonEmpty, Ext: d.Ext, JSONSchema: d.JSONSchemaSpec,
			CSVColumns: d.CSVColumns, MinBytes: d.MinBytes, MaxBytes: d.MaxBytes,
			NotEqualInput: d.NotEqualInput,
		}
		if d.schemaRaw != nil {
			sum := sha256.Sum256(d.schemaRaw)
			wd.JSONSchemaSHA256 = hex.EncodeToString(sum[:])
		}
		w.Deliverables = append(w.Deliverables, wd)
	}
	for _, v := range c.Verify {
		w.Verify = append(w.Verify, wireClause{
			Kind: v.Kind, Name: v.Name, Command: v.Command, Files: v.FilesSpec,
			FilesSHA256: v.filesDigest, Compare: v.Compare, Tolerance: v.Tolerance,
			Timeout: durString(v.Timeout), Outputs: v.Outputs, MinCites: v.MinCitations,
			MustPass: v.MustPass, Report: v.Report,
			Dimensions: v.Dimensions, Sees: v.Sees, JudgeModel: v.JudgeModel,
		})
	}
	if c.MaxDeliverables != 0 && c.MaxDeliverables != DefaultMaxDeliverables {
		w.Limits = &wireLimits{Deliverables: c.MaxDeliverables}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // commands hold > and &; keep them readable
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// maxSchemaShown bounds the schema text Describe puts in the task message.
const maxSchemaShown = 4 << 10

// Describe is the part of the agent's task message that states the delivery
// contract: the exact paths to claim and write, and their constraints. It
// never shows the verifiers' commands or files. Empty when nothing is
// declared.
func (c *Contract) Describe() string {
	if len(c.Deliverables) == 0 && len(c.Verify) == 0 {
		return ""
	}
	var b strings.Builder
	if len(c.Deliverables) > 0 {
		b.WriteString("Deliverables: declare exactly these paths with claim_outputs, then write them before you finish.\n")
	}
	for _, d := range c.Deliverables {
		var cs []string
		if d.NonEmpty {
			cs = append(cs, "non-empty (more than whitespace)")
		}
		if len(d.Ext) > 0 {
			cs = append(cs, "content must match its type ("+strings.Join(d.Ext, " or ")+")")
		}
		if d.schemaRaw != nil {
			var compact bytes.Buffer
			if json.Compact(&compact, d.schemaRaw) == nil && compact.Len() <= maxSchemaShown {
				cs = append(cs, "JSON valid against this JSON Schema: "+compact.String())
			} else {
				cs = append(cs, fmt.Sprintf("JSON valid against the task's JSON Schema (%d bytes, too long to show)", len(d.schemaRaw)))
			}
		}
		if len(d.CSVColumns) > 0 {
			cs = append(cs, "CSV whose header row has the columns "+strings.Join(d.CSVColumns, ", ")+" (any order; others allowed)")
		}
		switch {
		case d.MinBytes > 0 && d.MaxBytes > 0:
			cs = append(cs, fmt.Sprintf("%d to %d bytes", d.MinBytes, d.MaxBytes))
		case d.MinBytes > 0:
			cs = append(cs, fmt.Sprintf("at least %d bytes", d.MinBytes))
		case d.MaxBytes > 0:
			cs = append(cs, fmt.Sprintf("at most %d bytes", d.MaxBytes))
		}
		if d.NotEqualInput != "" {
			cs = append(cs, "must differ from "+d.NotEqualInput)
		}
		b.WriteString("- " + d.Path)
		if len(cs) > 0 {
			b.WriteString(": " + strings.Join(cs, "; "))
		}
		b.WriteString("\n")
	}
	if n := len(c.Verify); n > 0 {
		fmt.Fprintf(&b, "After you finish, %d verification check(s) run on the final /outputs and /workspace in a separate sandbox; they are not visible to you.\n", n)
	}
	return strings.TrimRight(b.String(), "\n")
}

// outputsPath finds /outputs/… paths named in a message.
var outputsPath = regexp.MustCompile(`/outputs/[A-Za-z0-9._/-]+[A-Za-z0-9_-]`)

// Revise returns the contract that follows a user message changing the
// requested outcome (R-CONTRACT-3): the objective carries the revision as
// written, /outputs paths the message names become deliverables (non-empty),
// and every other deliverable and clause carries over. c is not changed.
func (c *Contract) Revise(text string) *Contract {
	n := *c
	n.Deliverables = append([]Deliverable(nil), c.Deliverables...)
	n.Verify = append([]Clause(nil), c.Verify...)
	n.Objective = c.Objective + "\n\nRevised by the user: " + NormalizeObjective(text)
	for _, p := range outputsPath.FindAllString(text, -1) {
		p = path.Clean(p)
		if strings.HasPrefix(p, "/outputs/scratch") || p == "/outputs" {
			continue
		}
		if !slices.ContainsFunc(n.Deliverables, func(d Deliverable) bool { return d.Path == p }) {
			n.Deliverables = append(n.Deliverables, Deliverable{Path: p, NonEmpty: true})
		}
	}
	return &n
}
