package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on the task's own files, read when the contract is loaded.
const (
	maxSchemaFile = 4 << 20
	maxTreeBytes  = 256 << 20
	maxTreeFiles  = 20000
)

// loadSchema reads and compiles a JSON schema file. msg says what is wrong.
// A $ref may name other local files, resolved against the schema's path.
func loadSchema(host string, refs jsonschema.URLLoader) ([]byte, *jsonschema.Schema, string) {
	fi, err := os.Stat(host)
	switch {
	case err != nil:
		return nil, nil, fmt.Sprintf("%s does not exist (relative paths start at the task file's directory); fix the path", host)
	case !fi.Mode().IsRegular():
		return nil, nil, fmt.Sprintf("%s is not a regular file", host)
	case fi.Size() > maxSchemaFile:
		return nil, nil, fmt.Sprintf("%s is larger than %d MiB", host, maxSchemaFile>>20)
	}
	raw, err := os.ReadFile(host)
	if err != nil {
		return nil, nil, fmt.Sprintf("cannot read %s: %v", host, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Sprintf("%s is not valid JSON: %v", host, err)
	}
	comp := jsonschema.NewCompiler()
	comp.UseLoader(refs)
	if err := comp.AddResource(host, doc); err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", host, err)
	}
	sch, err := comp.Compile(host)
	if err != nil {
		return nil, nil, fmt.Sprintf("%s is not a valid JSON Schema: %s", host, oneLine(err.Error()))
	}
	return raw, sch, ""
}

// oneLine folds a multi-line library message for a file:line: report.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

var errTreeTooLarge = errors.New("too large to fingerprint")

// treeDigest is a sha256 over a directory's names, kinds, permissions,
// symlink targets and file contents, in lexical order, so any change to a
// verifier's files changes the contract's hash.
func treeDigest(dir string) (string, error) {
	h := sha256.New()
	var total int64
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if files++; files > maxTreeFiles {
			return errTreeTooLarge
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			fmt.Fprintf(h, "d %q\n", rel)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "l %q %q\n", rel, target)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if total += fi.Size(); total > maxTreeBytes {
				return errTreeTooLarge
			}
			fmt.Fprintf(h, "f %q %o %d\n", rel, fi.Mode().Perm(), fi.Size())
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, io.LimitReader(f, fi.Size()))
			f.Close()
			if err != nil {
				return err
			}
		default:
			fmt.Fprintf(h, "o %q %s\n", rel, t)
		}
		return nil
	})
	if errors.Is(err, errTreeTooLarge) {
		return "", fmt.Errorf("%s holds more than %d files or %d MiB; keep verifier files small", dir, maxTreeFiles, maxTreeBytes>>20)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
