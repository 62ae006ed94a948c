package run

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
)

// Trainability says whether the run in dir is a trajectory fit to train on
// or audit (R-REC-3) and, when it is not, every reason why:
//   - the record is incomplete: unreadable, a seq gap, a torn last line,
//     no run_finished, a blob an event references is missing, or an event
//     could not be recorded;
//   - the initial state cannot be rebuilt: an input is missing, changed
//     or added since run_started hashed it;
//   - isolation was off (--sandbox none, or no sandbox available) or a
//     warning says it was breached;
//   - the verifier is not reproducible: the task file is gone, no longer
//     loads or hashes differently from the recorded contract, or the
//     verification ran without a sandbox.
func Trainability(dir string) (trainable bool, reasons []string) {
	c, err := record.Read(dir)
	if err != nil {
		return false, []string{"the record is incomplete: " + err.Error()}
	}
	reasons = trainability(dir, c)
	return len(reasons) == 0, reasons
}

func trainability(dir string, c record.Contents) []string {
	var why []string
	evs := c.Events
	if len(evs) == 0 || evs[0].Type != record.TypeRunStarted {
		return []string{"the record is incomplete: it does not start with run_started"}
	}
	if c.TornTail {
		why = append(why, "the record is incomplete: its last line is torn")
	}
	if evs[len(evs)-1].Type != record.TypeRunFinished {
		why = append(why, "the record is incomplete: the run has not finished (no run_finished)")
	}
	why = append(why, missingBlobs(dir, evs)...)
	var rs record.RunStarted
	if err := evs[0].Decode(&rs); err != nil {
		return append(why, "the record is incomplete: "+err.Error())
	}
	if p := inputProblems(dir, rs.Inputs); len(p) > 0 {
		why = append(why, "the initial state cannot be rebuilt: "+strings.Join(p, "; "))
	}
	why = append(why, worldProblems(dir, rs)...)
	switch rs.Sandbox.Kind {
	case "bwrap":
	case "none":
		why = append(why, "isolation was off (--sandbox none)")
	case "unavailable":
		why = append(why, "isolation was off (no sandbox was available)")
	default:
		why = append(why, fmt.Sprintf("isolation is unknown (sandbox %q)", rs.Sandbox.Kind))
	}
	contractSeen := false
	for _, e := range evs {
		switch e.Type {
		case record.TypeWarning:
			var w record.Warning
			if e.Decode(&w) != nil {
				continue
			}
			switch {
			case strings.Contains(w.Code, "breach") || strings.Contains(w.Code, "escape"):
				why = append(why, "isolation was breached: "+w.Message)
			case w.Code == "record":
				why = append(why, "the record is incomplete: "+w.Message)
			}
		case record.TypeContract:
			if !contractSeen { // a later one is a revision by the user, not the task file
				contractSeen = true
				why = append(why, verifierProblems(e)...)
			}
		case record.TypeRunFinished:
			var rf record.RunFinished
			if e.Decode(&rf) != nil {
				continue
			}
			for _, f := range rf.Failures {
				if strings.Contains(f, "without a sandbox") {
					why = append(why, "the verifier is not reproducible: the verification ran without a sandbox")
				}
			}
		}
	}
	return why
}

// blobRef finds the blob references of an event at any depth (full_ref,
// content_ref, tools_ref, …).
var blobRef = regexp.MustCompile(`"[a-z_]*_ref":"(sha256:[0-9a-f]{64})"`)

func missingBlobs(dir string, evs []record.Event) []string {
	var first string
	n := 0
	checked := map[string]bool{}
	for _, e := range evs {
		if !bytes.Contains(e.Raw, []byte(`_ref":"sha256:`)) {
			continue
		}
		for _, m := range blobRef.FindAllSubmatch(e.Raw, -1) {
			ref := string(m[1])
			if checked[ref] {
				continue
			}
			checked[ref] = true
			p, err := record.BlobPath(dir, ref)
			if err == nil {
				_, err = os.Stat(p)
			}
			if err != nil {
				if n == 0 {
					first = fmt.Sprintf("%s (referenced at seq %d)", ref, e.Seq)
				}
				n++
			}
		}
	}
	switch n {
	case 0:
		return nil
	case 1:
		return []string{"the record is incomplete: blob " + first + " is missing"}
	}
	return []string{fmt.Sprintf("the record is incomplete: %d blobs are missing, the first %s", n, first)}
}

// verifierProblems checks that the task file the run recorded still
// loads and hashes to the recorded contract.
func verifierProblems(e record.Event) []string {
	var ce struct {
		U0   string `json:"u0"`
		File string `json:"file"`
		Hash string `json:"hash"`
	}
	if err := e.Decode(&ce); err != nil {
		return []string{"the verifier is not reproducible: " + err.Error()}
	}
	if ce.File == "" {
		return nil // no task file, no verifier
	}
	if _, err := os.Stat(ce.File); errors.Is(err, fs.ErrNotExist) {
		return []string{fmt.Sprintf("the verifier is not reproducible: the task file %s is gone", ce.File)}
	}
	task, err := contract.Load(ce.File)
	if err != nil {
		return []string{fmt.Sprintf("the verifier is not reproducible: the task file %s no longer loads: %s", ce.File, oneLineText(err.Error()))}
	}
	if ce.U0 != "" {
		task.SetObjective(ce.U0)
	}
	if h := task.Hash(); h != ce.Hash {
		return []string{fmt.Sprintf("the verifier is not reproducible: the task file %s changed since the run (hash %s, recorded %s)", ce.File, h, ce.Hash)}
	}
	return nil
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
