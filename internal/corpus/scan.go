// Package corpus is the run's local document collection and its embedded
// full-text index (SPEC R-SEARCH-1): BM25 ranking, phrase queries ("exact
// words"), and path and title fields (path:report, title:budget). It is the
// one package that uses the index library.
//
// Guarantees:
//   - Scan never follows a link and never reads outside the corpus
//     directory: a symlink is not indexed, and one pointing out of the
//     corpus is reported as refused; binary, empty, oversized and
//     unsupported files are not indexed and each is reported with why
//     (nothing is lost: every file stays readable at /inputs/corpus);
//     invalid UTF-8 is indexed with U+FFFD in place of the bad bytes;
//   - the index is cached under <cache>/<hash>, keyed by the corpus's
//     content hash (every indexed file's path and sha256, and the index
//     format): the same corpus reuses the index, any change builds a new
//     one; a half-built index is never reused (it is built aside and
//     renamed into place);
//   - a hit is a passage — a run of whole lines of one document with its
//     1-based line range — and its Text is exactly those lines (of the
//     readable text, for HTML), so it can stand as evidence;
//   - a query that is empty or only syntax is refused with how to write one.
package corpus

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limits of what is indexed.
const (
	// MaxFileBytes is the largest file indexed; larger ones stay readable
	// with read_file and grep.
	MaxFileBytes = 16 << 20
	sniffLen     = 8000
	// formatVersion changes the hash when the index layout changes.
	formatVersion = "apodex-corpus-2"
)

// Kinds of documents indexed, by extension.
var indexed = map[string]bool{".md": true, ".markdown": true, ".txt": true, ".text": true, ".html": true, ".htm": true, ".json": true, ".csv": true}

// File is one file of the corpus that is indexed.
type File struct {
	Path   string // relative to the corpus, with /
	SHA256 string
	Bytes  int64
}

// Manifest is what Scan found.
type Manifest struct {
	Dir     string
	Files   []File   // in path order
	Skipped []string // "path: why", in path order
	Hash    string   // "sha256:…" of the indexed content
}

// Scan lists the corpus in dir and hashes what will be indexed.
func Scan(dir string) (Manifest, error) {
	root, err := filepath.EvalSymlinks(dir) // the root may be a link; nothing inside is followed
	if err != nil {
		return Manifest{}, fmt.Errorf("corpus: %s: %w", dir, err)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return Manifest{}, fmt.Errorf("corpus: %s is not a directory: pass a directory of documents", dir)
	}
	m := Manifest{Dir: root}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if err != nil {
			if p == root {
				return err
			}
			m.Skipped = append(m.Skipped, rel+": unreadable: "+err.Error())
			return nil
		}
		switch t := d.Type(); {
		case d.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			m.Skipped = append(m.Skipped, rel+": "+linkNote(root, p))
			return nil
		case !t.IsRegular():
			m.Skipped = append(m.Skipped, rel+": not a regular file")
			return nil
		}
		f, why := check(p, rel)
		if why != "" {
			m.Skipped = append(m.Skipped, rel+": "+why)
			return nil
		}
		m.Files = append(m.Files, f)
		return nil
	})
	if err != nil {
		return Manifest{}, fmt.Errorf("corpus: scan %s: %w", dir, err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	sort.Strings(m.Skipped)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", formatVersion)
	for _, f := range m.Files {
		fmt.Fprintf(h, "%s\x00%s\n", f.Path, f.SHA256)
	}
	m.Hash = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return m, nil
}

// linkNote says why a link is not indexed.
func linkNote(root, p string) string {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "a broken symlink, not followed"
	}
	if rel, err := filepath.Rel(root, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "a symlink out of the corpus, refused"
	}
	return "a symlink, not followed (index its target file instead)"
}

// check decides whether a regular file is indexed and hashes it.
func check(p, rel string) (File, string) {
	ext := strings.ToLower(filepath.Ext(p))
	if ext == ".pdf" {
		return File{}, "PDF is not indexed; convert it to text (pdftotext) and add the .txt"
	}
	if !indexed[ext] {
		return File{}, "type " + ext + " is not indexed (indexed: .md .txt .html .json .csv)"
	}
	f, err := os.Open(p)
	if err != nil {
		return File{}, "unreadable: " + err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return File{}, "unreadable: " + err.Error()
	case st.Size() == 0:
		return File{}, "empty"
	case st.Size() > MaxFileBytes:
		return File{}, fmt.Sprintf("larger than %d MiB (%d bytes), not indexed; read it with read_file or grep", MaxFileBytes>>20, st.Size())
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); strings.IndexByte(string(head), 0) >= 0 {
		return File{}, "binary (has NUL bytes), not indexed"
	}
	h := sha256.New()
	n, err := io.Copy(h, br)
	if err != nil {
		return File{}, "unreadable: " + err.Error()
	}
	return File{Path: rel, SHA256: "sha256:" + hex.EncodeToString(h.Sum(nil)), Bytes: n}, ""
}
