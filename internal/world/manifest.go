// Package world reads, stores and checks worlds (SPEC R-WORLD): a world is a
// directory holding world.yaml (name, family, generator, difficulty and the
// task contract keys of task.yaml), inputs/, and optionally workspace/ (the
// initial /workspace, e.g. a repository), corpus/, tests/ and solution/
// (the reference end state: solution/outputs/… and solution/workspace/…).
//
// Guarantees:
//   - Load is strict: world.yaml's own keys are checked here, every other key
//     is a task contract key checked by internal/contract, so a world that
//     loads is a contract that runs;
//   - a world's id is "w-" and 12 hex of a sha256 over its canonical manifest
//     (world.yaml as JSON with sorted keys) and every file's slash path and
//     sha256, in path order; the same content always gets the same id, in
//     any directory, and any changed byte changes it;
//   - Store.Build stores a world under <home>/worlds/<id>/ exactly once, by
//     copying into a temporary directory and renaming it into place; the
//     stored files and directories are made read-only (but workspace/'s
//     directories, which its overlay shows to the agent) and never written
//     again, and the content hash guards them all; building the same content again returns the stored world;
//   - Check proves a stored world usable: its content still hashes to its id,
//     the reference solution passes every deliverable check and verifier
//     clause, and an empty delivery fails at least one;
//   - a rollout (Stage) starts only from an intact world: the seal taken
//     when it was stored (seal.go) shows every entry with its stored inode,
//     mode, size and mtime, or else every stored file is rehashed and
//     compared with the hash the store recorded for it, and a changed,
//     missing or added file (a replaced test) is refused, named;
//   - a rollout (Stage) gets fresh mutable state without copying the world:
//     /workspace is an overlay whose lower layer is the store (a copy only
//     when overlayfs is unavailable), inputs are hard links into the store;
//     Finish keeps the terminal workspace in O(changes), reading only the
//     overlay's upper layer: changed files are moved out of it into the
//     run's workspace/, and the paths it removed are written to the run's
//     base (runfiles.Base), through which every reader sees the unchanged
//     files in the store; nothing is done per file of the world.
package world

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/world/filelist"
	"go.yaml.in/yaml/v3"
)

// Families of worlds (R-WORLD-1).
const (
	FamilyFile   = "file"
	FamilySearch = "search"
	FamilyCode   = "code"
)

// ManifestFile is the world's manifest inside its directory.
const ManifestFile = "world.yaml"

// maxManifest bounds world.yaml.
const maxManifest = 1 << 20

// Generator names the generator a world came from. A hand-made world has
// none (Name empty).
type Generator struct {
	Name    string `yaml:"name" json:"name"`
	Version string `yaml:"version" json:"version"`
	Seed    int64  `yaml:"seed" json:"seed"`
	Level   int    `yaml:"level,omitempty" json:"level,omitempty"`
}

// Manifest is a loaded world.yaml.
type Manifest struct {
	Name      string
	Family    string
	Generator Generator
	// Difficulty holds the world's difficulty coordinates (docs/worlds.md):
	// acquisition_pressure and its parts for file and search worlds;
	// dependency_depth, state_depth, test_observability and
	// failure_distance for code worlds.
	Difficulty map[string]float64
	// Contract is the task; its relative paths resolve in the world's
	// directory and its inputs are the world's inputs/.
	Contract *contract.Contract
	// TaskYAML is the contract part of world.yaml as a task file (with
	// inputs: inputs when the world has inputs).
	TaskYAML []byte
	// Canonical is world.yaml as JSON with sorted keys: what the id hashes.
	Canonical []byte
}

// worldKeys are world.yaml's own keys; the rest belong to the contract.
var worldKeys = []string{"name", "family", "generator", "difficulty", "corpus"}

// Load reads and checks the world in dir.
func Load(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("world: %s: %v; a world directory holds a world.yaml (see docs/worlds.md)", dir, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("world: read %s: %w", path, err)
	}
	if len(data) > maxManifest {
		return nil, fmt.Errorf("world: %s is larger than 1 MiB; keep data in inputs/", path)
	}
	return parse(data, dir)
}

func parse(data []byte, dir string) (*Manifest, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("world: world.yaml is not valid YAML: %v", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("world: world.yaml must be a mapping with name, family and the task keys")
	}
	root := doc.Content[0]
	m := &Manifest{}
	task := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var err error
		switch k.Value {
		case "name":
			err = v.Decode(&m.Name)
		case "family":
			err = v.Decode(&m.Family)
		case "generator":
			err = decodeStrict(v, &m.Generator)
		case "difficulty":
			err = v.Decode(&m.Difficulty)
		case "corpus":
			var s string
			if err = v.Decode(&s); err == nil && s != "corpus" {
				err = errors.New(`a world's corpus is its corpus/ directory: write corpus: corpus`)
			}
		case "inputs":
			err = errors.New("a world's inputs are its inputs/ directory: remove the inputs key")
		default:
			task.Content = append(task.Content, k, v)
		}
		if err != nil {
			return nil, fmt.Errorf("world: world.yaml:%d: %s: %v", k.Line, k.Value, err)
		}
	}
	switch {
	case m.Name == "":
		return nil, errors.New("world: world.yaml has no name: add name: <short-name>")
	case !slices.Contains([]string{FamilyFile, FamilySearch, FamilyCode}, m.Family):
		return nil, fmt.Errorf("world: world.yaml family %q: use file, search or code", m.Family)
	}
	if isDir(filepath.Join(dir, "inputs")) {
		task.Content = append(task.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "inputs"}, &yaml.Node{Kind: yaml.ScalarNode, Value: "inputs"})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(task); err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	enc.Close()
	m.TaskYAML = buf.Bytes()
	c, err := contract.Parse(m.TaskYAML, dir)
	if err != nil {
		return nil, fmt.Errorf("world: world.yaml's task keys:\n%w", err)
	}
	m.Contract = c
	var generic map[string]any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	if m.Canonical, err = json.Marshal(generic); err != nil {
		return nil, fmt.Errorf("world: world.yaml cannot be made canonical: %w", err)
	}
	return m, nil
}

func decodeStrict(n *yaml.Node, v any) error {
	raw, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// File is one file of a world, by slash path relative to its directory
// (package filelist keeps the stored list's forms).
type File = filelist.File

// Hash is a file's SHA-256 as its 32 bytes.
type Hash = filelist.Hash

// Files lists and hashes dir's regular files in path order, leaving out
// world.yaml and top-level names that start with a dot (the store's own).
// A symlink or special file is an error: a world is closed and rebuildable.
func Files(dir string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if !strings.Contains(rel, "/") && (rel == ManifestFile || strings.HasPrefix(rel, ".")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("world: %s is not a regular file; a world holds only files and directories", rel)
		}
		sum, n, err := hashFile(p)
		if err != nil {
			return err
		}
		out = append(out, File{Path: rel, SHA256: sum, Bytes: n})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// ID is the content address of a world: its canonical manifest and files.
func ID(canonical []byte, files []File) string {
	h := sha256.New()
	h.Write([]byte("apodex-world-v1\n"))
	h.Write(canonical)
	h.Write([]byte("\n"))
	var line []byte // the path, NUL, the hash in hex, newline: one buffer for every file
	for _, f := range files {
		line = append(append(line[:0], f.Path...), 0)
		line = hex.AppendEncode(line, f.SHA256[:])
		h.Write(append(line, '\n'))
	}
	return "w-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// hashed counts the files hashFile read (tests assert what was hashed).
var hashed atomic.Int64

func hashFile(p string) (Hash, int64, error) {
	hashed.Add(1)
	var sum Hash
	f, err := os.Open(p)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	n, err := io.CopyBuffer(struct{ io.Writer }{h}, struct{ io.Reader }{f}, *buf)
	h.Sum(sum[:0])
	return sum, n, err
}

// hashBufs keep hashFile from allocating a buffer per file (io.Copy's
// 32 KiB each: 3 GB to rehash 100,000 files).
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
