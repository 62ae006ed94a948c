package team

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

// Gate is the final-answer gate (R-PLAN-2): finish is refused while any
// active item is open or in progress and, for a run started in planning
// mode, until one branch was delegated and one claim independently
// verified; then while a load-bearing claim is refuted.
//
// Once those pass, adaptive effort (effort.go) may defer finish for one
// more wave on unsettled load-bearing claims, and synthesis writes the
// report deliverables.
func (t *Team) Gate(string) error {
	if err := t.gateBoard(); err != nil {
		return err
	}
	t.recordCitations()
	if err := t.gateRefuted(t.ledger()); err != nil {
		return err
	}
	if err := t.maybeEffort(); err != nil {
		return err
	}
	return t.maybeSynthesis()
}

// gateRefuted refuses finish while a load-bearing claim is refuted: the
// deliverables would rest on something a verifier showed false.
func (t *Team) gateRefuted(l *claims.Ledger) error {
	var bad []string
	for _, c := range l.Claims {
		if c.Status != claims.Refuted || !c.LoadBearing || c.Withdrawn != "" {
			continue
		}
		s := fmt.Sprintf("%s %q", c.ID, clipBytes(c.Text, 120))
		if c.StatedBy != "" {
			s += " (by " + c.StatedBy
			if c.Item != "" {
				s += " on " + c.Item
			}
			s += ")"
		}
		s += " is refuted and load-bearing (" + strings.Join(c.Bears, "; ") + ")"
		if n := len(c.Verdicts); n > 0 {
			v := c.Verdicts[n-1]
			if v.Location != "" {
				s += ", at " + v.Location
			}
			if v.Repair != "" {
				s += ", repair: " + v.Repair
			}
		}
		switch {
		case c.Item != "":
			s += fmt.Sprintf(": reopen %s (board_reopen), have it redone and resolve it again, or withdraw %s (mark_claim {\"claim\": %q, \"mark\": \"withdrawn\", \"reason\": …}) if the deliverables no longer rest on it", c.Item, c.ID, c.ID)
		default:
			s += fmt.Sprintf(": remove what cites it from the deliverables, or withdraw %s (mark_claim {\"claim\": %q, \"mark\": \"withdrawn\", \"reason\": …})", c.ID, c.ID)
		}
		bad = append(bad, s)
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("a refuted claim is load-bearing: %s", joinSemi(bad))
}

// citeRef matches one bracketed citation, [K3] or [E7, K2].
var citeRef = regexp.MustCompile(`\[((?:[KE][0-9]+)(?:\s*[,;]\s*[KE][0-9]+)*)\]`)

// maxCiteBytes bounds how much of a deliverable is read for citations.
const maxCiteBytes = 4 << 20

// recordCitations reads what each deliverable cites and records it when
// the file changed since its last reading (citations events), so that
// the ledger, a fold of the record, knows which claims the deliverables
// cite. Without contract deliverables, every file under /outputs (but
// scratch) is read.
func (t *Team) recordCitations() {
	if t.cfg.FS == nil || t.cfg.Log == nil {
		return
	}
	paths := slices.Clone(t.cfg.Deliverables)
	if len(paths) == 0 {
		paths = outputFiles(t.cfg.FS)
	}
	for _, p := range paths {
		data, ok := readPlane(t.cfg.FS, p)
		if !ok {
			continue
		}
		sum := sha256.Sum256(data)
		hash := "sha256:" + hex.EncodeToString(sum[:])
		t.mu.Lock()
		if t.citeHash == nil {
			t.citeHash = map[string]string{}
		}
		if t.citeHash[p] == hash {
			t.mu.Unlock()
			continue
		}
		t.citeHash[p] = hash
		c := record.Citations{Path: p, Hash: hash}
		for _, m := range citeRef.FindAllStringSubmatch(string(data), -1) {
			for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
				if id[0] == 'K' && !slices.Contains(c.Claims, id) {
					c.Claims = append(c.Claims, id)
				} else if id[0] == 'E' && !slices.Contains(c.Evidence, id) {
					c.Evidence = append(c.Evidence, id)
				}
			}
		}
		t.record(record.TypeCitations, "runtime", c)
		t.mu.Unlock()
	}
}

// readPlane reads a regular file by plane path, at most maxCiteBytes.
func readPlane(fsys *workspace.FS, planePath string) ([]byte, bool) {
	p, err := fsys.Resolve(planePath)
	if err != nil {
		return nil, false
	}
	f, err := fsys.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCiteBytes))
	return data, err == nil
}

// outputFiles are the regular files under /outputs but scratch, sorted.
func outputFiles(fsys *workspace.FS) []string {
	root, err := fsys.OpenRoot(workspace.Outputs)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && p == "scratch":
			return fs.SkipDir
		case d.Type().IsRegular() && len(out) < 200:
			out = append(out, "/outputs/"+p)
		}
		return nil
	})
	return out
}
