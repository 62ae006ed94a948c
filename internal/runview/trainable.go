package runview

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/world"
)

// Trainability says whether the run in dir is a trajectory fit to train on
// or audit (R-REC-3) and, when it is not, every reason why:
//   - the record was changed after it was written: its hash chain or head
//     does not hold (record.Integrity), named by seq and line;
//   - the record is incomplete: unreadable, a seq gap, a torn last line,
//     no run_finished, a blob an event references is missing (the run's
//     copy of its task included), or an event could not be recorded;
//   - the initial state cannot be rebuilt: an input is missing, changed
//     or added since run_started hashed it;
//   - isolation was off (--sandbox none, or no sandbox available) or a
//     warning says it was breached;
//   - the verifier is not reproducible: the verification ran without a
//     sandbox, or (a run recorded before runs kept their task) the task
//     file is gone, no longer loads or hashes differently from the
//     recorded contract.
func Trainability(dir string) (trainable bool, reasons []string) {
	st, err := runstate.Load(dir)
	if err != nil {
		return false, []string{"the record is incomplete: " + err.Error()}
	}
	reasons = trainability(dir, st, nil)
	return len(reasons) == 0, reasons
}

// TrainabilityOf is Trainability for a record the caller has already
// folded with runstate.Load (and Refresh), up to date.
func TrainabilityOf(st *runstate.Loaded) (trainable bool, reasons []string) {
	return TrainabilityWith(st, nil)
}

// Staged is the stored world a run staged and the answer of its Intact
// (world.Rollout.Intact): what the run already knows of it.
type Staged struct {
	World  *world.World
	Intact error
}

// TrainabilityWith is TrainabilityOf for a world run whose caller holds
// the world it staged (nil: none): its Intact answer is used instead of
// the store loaded and checked a second time.
func TrainabilityWith(st *runstate.Loaded, w *Staged) (trainable bool, reasons []string) {
	reasons = trainability(st.Dir, st, w)
	return len(reasons) == 0, reasons
}

func trainability(dir string, st *runstate.Loaded, staged *Staged) []string {
	var why []string
	rs := st.Started
	if rs == nil {
		return []string{"the record is incomplete: it does not start with run_started"}
	}
	if err := st.Integrity.Err; err != nil {
		why = append(why, strings.TrimPrefix(err.Error(), "record: "))
	}
	if st.TornTail {
		why = append(why, "the record is incomplete: its last line is torn")
	}
	if st.Finished == nil || st.FinishedSeq != st.Seq {
		why = append(why, "the record is incomplete: the run has not finished (no run_finished)")
	}
	why = append(why, missingBlobs(dir, st.Blobs)...)
	if p := InputProblems(dir, rs.Inputs); len(p) > 0 {
		why = append(why, "the initial state cannot be rebuilt: "+strings.Join(p, "; "))
	}
	why = append(why, worldProblems(dir, *rs, staged)...)
	switch rs.Sandbox.Kind {
	case "bwrap", "native":
	case "none":
		why = append(why, "isolation was off (--sandbox none)")
	case "unavailable":
		why = append(why, "isolation was off (no sandbox was available)")
	default:
		why = append(why, fmt.Sprintf("isolation is unknown (sandbox %q)", rs.Sandbox.Kind))
	}
	for _, w := range st.Warnings {
		switch {
		case strings.Contains(w.Code, "breach") || strings.Contains(w.Code, "escape"):
			why = append(why, "isolation was breached: "+w.Message)
		case w.Code == "record":
			why = append(why, "the record is incomplete: "+w.Message)
		}
	}
	if len(st.Contracts) > 0 { // a later one is a revision by the user, not the task file
		why = append(why, verifierProblems(dir, st.Contracts[0].Contract)...)
	}
	if st.Finished != nil {
		for _, f := range st.Finished.Failures {
			if strings.Contains(f, "without a sandbox") {
				why = append(why, "the verifier is not reproducible: the verification ran without a sandbox")
			}
		}
	}
	return why
}

func missingBlobs(dir string, refs map[string]int64) []string {
	var first string
	n := 0
	var firstSeq int64
	for ref, seq := range refs {
		p, err := record.BlobPath(dir, ref)
		var fi os.FileInfo
		if err == nil {
			fi, err = os.Lstat(p) // a link is not a blob
		}
		if err != nil || !fi.Mode().IsRegular() {
			if n == 0 || seq < firstSeq {
				first, firstSeq = fmt.Sprintf("%s (referenced at seq %d)", ref, seq), seq
			}
			n++
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
func verifierProblems(dir string, ce record.Contract) []string {
	if ce.File == "" {
		return nil // no task file, no verifier
	}
	if ce.TaskRef != "" { // the run keeps its task: its blobs are checked above
		return nil
	}
	if _, err := os.Stat(ce.File); errors.Is(err, fs.ErrNotExist) {
		return []string{fmt.Sprintf("the verifier is not reproducible: the task file %s is gone", ce.File)}
	}
	task, err := contract.LoadWith(ce.File, contract.Options{AllowOutside: true}) // as the run accepted it
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

// InputProblems checks the run's inputs/ against the hashes run_started
// recorded: every recorded file there with the same content, nothing else.
func InputProblems(dir string, want []record.FileEntry) []string {
	root := filepath.Join(dir, "inputs")
	wanted := map[string]string{}
	for _, f := range want {
		wanted[f.Path] = f.SHA256
	}
	var problems []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		plane := "/inputs/" + filepath.ToSlash(rel)
		sum, ok := wanted[plane]
		seen[plane] = true
		switch {
		case !ok:
			problems = append(problems, plane+" was added")
		case !d.Type().IsRegular():
			problems = append(problems, plane+" is no longer a regular file")
		default:
			got, _, err := workspace.HashFile(p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s cannot be read: %v", plane, err))
			} else if got != sum {
				problems = append(problems, fmt.Sprintf("%s changed (recorded %s, now %s)", plane, sum, got))
			}
		}
		return nil
	})
	if err != nil && !(os.IsNotExist(err) && len(want) == 0) {
		problems = append(problems, fmt.Sprintf("the inputs directory cannot be read: %v", err))
	}
	for _, f := range want {
		if !seen[f.Path] {
			problems = append(problems, f.Path+" is missing")
		}
	}
	sort.Strings(problems)
	return problems
}
