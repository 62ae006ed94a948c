package claim

import (
	"fmt"
	"os"
	"strings"

	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/workspace"
)

// validRefs is what a refused ref is told.
const validRefs = "a ref is an evidence id a search, fetch, read_file or grep returned (E3), a file path that exists (/workspace/x.csv, /outputs/report.md, /inputs/a.txt), or a command ref bash#<call id> of a bash call you made"

// commandPrefix starts a command ref.
const commandPrefix = "bash#"

// CheckRefs refuses every ref that is not an evidence id of Q, an existing
// file of fs, or a bash call on the record; what names the refs in the
// message ("claim 2").
func (c *Checker) CheckRefs(fs *workspace.FS, what string, refs []string) error {
	var calls map[string]bool
	for _, raw := range refs {
		ref := strings.TrimSpace(raw)
		switch {
		case evidence.IsID(ref):
			if c.cfg.Evidence == nil {
				return fmt.Errorf("%s cites %s, but this run holds no evidence ids; %s", what, ref, validRefs)
			}
			if _, ok := c.cfg.Evidence.Get(ref); !ok {
				return fmt.Errorf("%s cites %s, which is not an evidence id of this run (Q holds E1 to E%d); %s", what, ref, c.cfg.Evidence.Len(), validRefs)
			}
		case strings.HasPrefix(ref, commandPrefix):
			if calls == nil {
				calls = c.bashCalls()
			}
			if !calls[strings.TrimPrefix(ref, commandPrefix)] {
				return fmt.Errorf("%s cites %s, which is no bash call on the record; %s", what, ref, validRefs)
			}
		case strings.HasPrefix(ref, "/"):
			if what == "verify" && dirExists(fs, ref) {
				continue // the verifier gets its listing, and the cut is said
			}
			if !fileExists(fs, ref) {
				return fmt.Errorf("%s cites %s, which is not an existing file; %s", what, ref, validRefs)
			}
		default:
			return fmt.Errorf("%s cites %q, which is not a ref; %s", what, ClipBytes(raw, 80), validRefs)
		}
	}
	return nil
}

func dirExists(fs *workspace.FS, ref string) bool {
	if fs == nil {
		return false
	}
	p, err := fs.Resolve(ref)
	if err != nil {
		return false
	}
	st, err := os.Stat(p.Host)
	return err == nil && st.IsDir()
}

func fileExists(fs *workspace.FS, ref string) bool {
	if fs == nil {
		return false
	}
	p, err := fs.Resolve(ref)
	if err != nil {
		return false
	}
	f, err := fs.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

// bashCalls is the set of bash call ids on the record, from the run's
// live state (not a read of the record).
func (c *Checker) bashCalls() map[string]bool {
	out := map[string]bool{}
	c.cfg.State.Read(func(st *runstate.State) {
		for _, s := range st.Steps {
			if s.Tool == "bash" {
				out[s.CallID] = true
			}
		}
	})
	return out
}

// ClaimRefs checks every claim's evidence of a report.
func (c *Checker) ClaimRefs(fs *workspace.FS) func(rep *Report) error {
	return func(rep *Report) error {
		for i, k := range rep.Claims {
			if err := c.CheckRefs(fs, fmt.Sprintf("claim %d", i+1), k.Evidence); err != nil {
				return err
			}
		}
		return nil
	}
}

// ExpandRef is the text the verifier sees for a ref: an evidence id's
// exact text with its source, a command's arguments and output, a file's
// content.
func (c *Checker) ExpandRef(ref string) string {
	switch {
	case evidence.IsID(ref) && c.cfg.Evidence != nil:
		it, ok := c.cfg.Evidence.Get(ref)
		text, err := c.cfg.Evidence.Text(ref)
		if !ok || err != nil {
			return "(unknown evidence id)"
		}
		return fmt.Sprintf("(evidence %s: %s lines %d-%d, %s)\n%s", it.ID, it.Source, it.Span.From, it.Span.To, it.Kind, text)
	case strings.HasPrefix(ref, commandPrefix) && c.cfg.Log != nil:
		return c.commandText(strings.TrimPrefix(ref, commandPrefix))
	}
	text, _ := c.fileEvidence(ref, maxEvidenceBytes)
	return text
}

// commandText is a recorded bash call's arguments and what it showed. It
// reads the record (the state keeps no outputs), for the one call.
func (c *Checker) commandText(id string) string {
	rc, err := record.Read(c.cfg.Log.Dir())
	if err != nil {
		return "(cannot read the record: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, e := range rc.Events {
		p, _ := record.DecodePayload(e)
		switch p := p.(type) {
		case *record.ToolCall:
			if p.CallID == id {
				fmt.Fprintf(&b, "command: %s\n", p.Arguments)
			}
		case *record.ToolResult:
			if p.CallID == id {
				fmt.Fprintf(&b, "output:\n%s\n", p.Output)
			}
		}
	}
	return b.String()
}
