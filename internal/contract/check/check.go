// Package check judges a run's deliverables against their contract
// (R-CONTRACT-2): each declared file under /outputs exists as a regular
// file and meets every constraint it declares. It reads files only below
// the outputs and inputs directories it is given (os.Root), never follows
// a path out of them, and returns one Finding per constraint, in a fixed
// order, pass or fail.
package check

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/contract"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Constraint names used in findings.
const (
	Exists        = "exists"
	NonEmpty      = "non_empty"
	Ext           = "ext"
	JSONSchema    = "json_schema"
	CSVColumns    = "csv_columns"
	MinBytes      = "min_bytes"
	MaxBytes      = "max_bytes"
	NotEqualInput = "not_equal_input"
)

// Finding is the verdict on one constraint of one deliverable.
type Finding struct {
	Path       string `json:"path"`
	Constraint string `json:"constraint"`
	OK         bool   `json:"ok"`
	Detail     string `json:"detail,omitempty"`
}

// maxCheckBytes bounds how much of a deliverable content checks read.
const maxCheckBytes = 64 << 20

// Deliverables checks every deliverable of c against the files in
// outputsHost (the host directory of /outputs); inputsHost is the host
// directory of /inputs, for not_equal_input.
//
// Each deliverable gets an "exists" finding and, when it exists, one finding
// per constraint it declares, in a fixed order. A deliverable exists only as
// a regular file: a symlink, directory or device fails, and no path is
// followed outside outputsHost. The checks:
//   - non_empty: at least one byte that is not whitespace;
//   - ext: the content fits the extension: JSON, JSON Lines, CSV, TSV and
//     YAML parse; PDF, PNG, JPEG, GIF, gzip and zip-based files start with
//     their magic bytes; common text types are UTF-8 without NUL bytes;
//     other extensions pass on the name alone (the detail says so);
//   - json_schema: the file parses as one JSON value that the schema accepts;
//   - csv_columns: the first row, read as CSV (tab-separated for .tsv),
//     contains every listed column, in any order, others allowed; cells are
//     trimmed and a UTF-8 byte-order mark is ignored;
//   - min_bytes, max_bytes: the size, inclusive;
//   - not_equal_input: the bytes differ from the input file.
//
// Content checks of a file over 64 MiB fail as too large to check.
func Deliverables(c *contract.Contract, outputsHost, inputsHost string) []Finding {
	var out []Finding
	outs, err := os.OpenRoot(outputsHost)
	if err != nil {
		for _, d := range c.Deliverables {
			out = append(out, Finding{d.Path, Exists, false, fmt.Sprintf("cannot open the outputs directory: %v", err)})
		}
		return out
	}
	defer outs.Close()
	var ins *os.Root
	if inputsHost != "" {
		if ins, err = os.OpenRoot(inputsHost); err == nil {
			defer ins.Close()
		}
	}
	for _, d := range c.Deliverables {
		out = append(out, checkOne(outs, ins, d)...)
	}
	return out
}

func checkOne(outs, ins *os.Root, d contract.Deliverable) []Finding {
	var fs []Finding
	add := func(constraint string, ok bool, format string, a ...any) {
		fs = append(fs, Finding{d.Path, constraint, ok, fmt.Sprintf(format, a...)})
	}
	rel := strings.TrimPrefix(d.Path, "/outputs/")
	fi, err := outs.Lstat(rel)
	switch {
	case errors.Is(err, os.ErrNotExist):
		add(Exists, false, "missing: nothing was written at %s", d.Path)
		return fs
	case err != nil:
		add(Exists, false, "cannot inspect it: %v", err)
		return fs
	case fi.Mode()&os.ModeSymlink != 0:
		add(Exists, false, "is a symbolic link; a deliverable must be a regular file")
		return fs
	case !fi.Mode().IsRegular():
		add(Exists, false, "is not a regular file (%s)", fi.Mode().Type())
		return fs
	}
	size := fi.Size()
	add(Exists, true, "%d bytes", size)

	var data []byte
	var readErr error
	loaded := false
	content := func() ([]byte, error) {
		if !loaded {
			loaded = true
			data, readErr = readRegular(outs, rel, fi)
		}
		return data, readErr
	}

	if d.NonEmpty {
		switch b, err := content(); {
		case size == 0:
			add(NonEmpty, false, "is empty (0 bytes)")
		case err != nil:
			add(NonEmpty, false, "%v", err)
		case len(bytes.TrimSpace(b)) == 0:
			add(NonEmpty, false, "holds only whitespace (%d bytes)", size)
		default:
			add(NonEmpty, true, "%d bytes", size)
		}
	}
	if len(d.Ext) > 0 {
		ok, detail := sniff(d.MatchedExt(), content)
		add(Ext, ok, "%s", detail)
	}
	if d.JSONSchema != "" {
		sch, msg := d.Schema()
		if msg != "" {
			add(JSONSchema, false, "%s", msg)
		} else {
			ok, detail := checkSchema(sch, content)
			add(JSONSchema, ok, "%s", detail)
		}
	}
	if len(d.CSVColumns) > 0 {
		b, err := content()
		if err != nil {
			add(CSVColumns, false, "%v", err)
		} else {
			ok, detail := checkColumns(b, strings.HasSuffix(strings.ToLower(d.Path), ".tsv"), d.CSVColumns)
			add(CSVColumns, ok, "%s", detail)
		}
	}
	if d.MinBytes > 0 {
		add(MinBytes, size >= d.MinBytes, "%d bytes, at least %d required", size, d.MinBytes)
	}
	if d.MaxBytes > 0 {
		add(MaxBytes, size <= d.MaxBytes, "%d bytes, at most %d allowed", size, d.MaxBytes)
	}
	if d.NotEqualInput != "" {
		ok, detail := differs(outs, rel, ins, strings.TrimPrefix(d.NotEqualInput, "/inputs/"))
		add(NotEqualInput, ok, "%s", strings.ReplaceAll(detail, "INPUT", d.NotEqualInput))
	}
	return fs
}

// readRegular reads a file that Lstat saw as fi, refusing one swapped since.
func readRegular(root *os.Root, rel string, fi os.FileInfo) ([]byte, error) {
	if fi.Size() > maxCheckBytes {
		return nil, fmt.Errorf("larger than %d MiB, too large to check", maxCheckBytes>>20)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("cannot read it: %v", err)
	}
	defer f.Close()
	if now, err := f.Stat(); err != nil || !os.SameFile(now, fi) {
		return nil, fmt.Errorf("changed while being checked")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCheckBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read it: %v", err)
	}
	return b, nil
}

var magic = map[string]string{
	".pdf": "%PDF-", ".png": "\x89PNG\r\n\x1a\n", ".jpg": "\xff\xd8\xff", ".jpeg": "\xff\xd8\xff",
	".gif": "GIF8", ".gz": "\x1f\x8b", ".tgz": "\x1f\x8b", ".zip": "PK\x03\x04",
	".docx": "PK\x03\x04", ".xlsx": "PK\x03\x04", ".pptx": "PK\x03\x04", ".odt": "PK\x03\x04",
}

var textExts = []string{".md", ".markdown", ".txt", ".text", ".html", ".htm", ".xml", ".svg",
	".tex", ".rst", ".log", ".py", ".go", ".js", ".ts", ".sh", ".r", ".sql", ".css", ".toml",
	".ini", ".c", ".h", ".java", ".rb", ".rs"}

// sniff checks that content fits the extension ext.
func sniff(ext string, content func() ([]byte, error)) (bool, string) {
	_, known := magic[ext]
	switch ext {
	case ".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".yaml", ".yml":
		known = true
	}
	known = known || slices.Contains(textExts, ext)
	if !known {
		return true, fmt.Sprintf("name ends in %s; content is not checked for this type", ext)
	}
	b, err := content()
	if err != nil {
		return false, err.Error()
	}
	switch ext {
	case ".json":
		if !json.Valid(b) {
			return false, "not valid JSON"
		}
	case ".jsonl", ".ndjson":
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 && !json.Valid(line) {
				return false, fmt.Sprintf("line %d is not valid JSON", i+1)
			}
		}
	case ".csv", ".tsv":
		r := csv.NewReader(bytes.NewReader(b))
		if ext == ".tsv" {
			r.Comma = '\t'
		}
		if _, err := r.ReadAll(); err != nil {
			return false, "not valid " + strings.ToUpper(ext[1:]) + ": " + err.Error()
		}
	case ".yaml", ".yml":
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return false, "not valid YAML: " + oneLine(err.Error())
		}
	default:
		if m, ok := magic[ext]; ok {
			if !bytes.HasPrefix(b, []byte(m)) {
				return false, fmt.Sprintf("does not start like a %s file", ext)
			}
			break
		}
		if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			return false, fmt.Sprintf("is not UTF-8 text, as a %s file must be", ext)
		}
	}
	return true, "content fits " + ext
}

func checkSchema(sch *jsonschema.Schema, content func() ([]byte, error)) (bool, string) {
	b, err := content()
	if err != nil {
		return false, err.Error()
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return false, "not valid JSON: " + err.Error()
	}
	if err := sch.Validate(doc); err != nil {
		msg := oneLine(err.Error())
		if len(msg) > 1000 {
			msg = msg[:1000] + "..."
		}
		return false, msg
	}
	return true, "valid against the schema"
}

// checkColumns reads the header row and looks for every wanted column.
func checkColumns(b []byte, tsv bool, want []string) (bool, string) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	if tsv {
		r.Comma = '\t'
	}
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return false, "no header row"
	}
	if err != nil {
		return false, "cannot read the header row: " + err.Error()
	}
	for i := range header {
		header[i] = strings.TrimSpace(header[i])
	}
	header[0] = strings.TrimPrefix(header[0], "\uFEFF")
	var missing []string
	for _, w := range want {
		if !slices.Contains(header, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("header lacks %s; it has %s", strings.Join(missing, ", "), clip(strings.Join(header, ", ")))
	}
	return true, "header has " + strings.Join(want, ", ")
}

// differs compares a deliverable with an input file, byte for byte. INPUT
// in the detail stands for the input's plane path.
func differs(outs *os.Root, rel string, ins *os.Root, inRel string) (bool, string) {
	if ins == nil {
		return false, "no inputs directory to compare with INPUT"
	}
	a, err := digest(outs, rel)
	if err != nil {
		return false, "cannot read the deliverable: " + err.Error()
	}
	b, err := digest(ins, inRel)
	if errors.Is(err, fs.ErrNotExist) {
		return true, "INPUT does not exist, so they differ"
	}
	if err != nil {
		return false, "cannot read INPUT: " + err.Error()
	}
	if a == b {
		return false, "byte-identical to INPUT; the deliverable must be new work, not a copy"
	}
	return true, "differs from INPUT"
}

func digest(root *os.Root, rel string) (string, error) {
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return string(h.Sum(nil)), nil
}

// oneLine folds a multi-line library message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
