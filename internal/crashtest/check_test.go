package crashtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/record"
)

// reference is what an uncrashed run of a scenario leaves.
type reference struct {
	events   int
	changers map[string]bool   // subagent calls ("agent call_id") that changed workspace files
	tree     map[string]string // "outputs/x", "workspace/y" -> sha256
	board    string            // apodex board, without its header line (team)
}

func uncrashed(t *testing.T, sc *scenario, args func(string) []string, home string) *reference {
	t.Helper()
	c := startChild(t, args(home)...)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the uncrashed run did not end within a minute")
	}
	if code := c.exitCode(); code != 0 {
		t.Fatalf("the uncrashed %s run exited %d:\n%s", sc.name, code, c.output())
	}
	dir := findRun(home)
	recd, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	changers := map[string]bool{}
	for _, e := range recd.Events {
		var d record.FileDelta
		if e.Type == record.TypeFileDelta && e.Agent != sc.coordinator() && e.Decode(&d) == nil &&
			!strings.HasPrefix(d.CallID, "merge:") && strings.HasPrefix(d.Path, "/workspace/") {
			changers[e.Agent+" "+d.CallID] = true
		}
	}
	return &reference{events: len(recd.Events), changers: changers, tree: tree(t, dir), board: boardOf(t, sc, home, dir)}
}

// checkRun checks a crashed and resumed run against the uncrashed one.
func checkRun(t *testing.T, sc *scenario, ref *reference, home, dir string, kills []killPoint, sent []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	// seq: no gap, no duplicate (record.Parse enforces 1, 2, 3, …).
	recd, err := record.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the final record: %v", err)
	}
	if recd.TornTail || !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("the final record ends with a torn line")
	}
	evs := recd.Events
	if n := len(evs); n == 0 || evs[n-1].Type != record.TypeRunFinished {
		t.Fatalf("the final record does not end with run_finished")
	}
	var fin record.RunFinished
	evs[len(evs)-1].Decode(&fin)
	if fin.Status != "completed" {
		t.Errorf("run_finished: status %s (%s), error %q, failures %v; want completed", fin.Status, fin.Termination, fin.Error, fin.Failures)
	}

	// No event before a kill point is lost or changed.
	for _, k := range kills {
		if !bytes.HasPrefix(data, k.prefix) {
			t.Errorf("%v: the %d events recorded before the kill are not a prefix of the final record", k, k.lines)
		}
	}

	// One resumed event per resume, saying where.
	var resumed []record.Event
	for _, e := range evs {
		if e.Type == "resumed" {
			resumed = append(resumed, e)
		}
	}
	resumes := 0
	for _, k := range kills {
		if !k.finished {
			resumes++
		}
	}
	if len(resumed) != resumes {
		t.Errorf("%d resumed events, want one per resume (%d)", len(resumed), resumes)
	}
	for i, e := range resumed {
		if i >= len(kills) {
			break
		}
		var r struct {
			AfterSeq int64               `json:"after_seq"`
			Repaired bool                `json:"repaired_torn_tail"`
			InFlight map[string][]string `json:"in_flight"`
			Reason   string              `json:"reason"`
		}
		if err := e.Decode(&r); err != nil {
			t.Error(err)
			continue
		}
		k := kills[i]
		if r.AfterSeq != int64(k.lines) || e.Seq <= r.AfterSeq {
			t.Errorf("resumed event %d (seq %d) says after_seq %d; the kill left %d events", i+1, e.Seq, r.AfterSeq, k.lines)
		}
		if r.Repaired != k.torn {
			t.Errorf("resumed event %d: repaired_torn_tail = %v, want %v", i+1, r.Repaired, k.torn)
		}
		if r.Reason == "" {
			t.Errorf("resumed event %d gives no reason", i+1)
		}
	}

	// The same deliverables and workspace as the uncrashed run.
	got := tree(t, dir)
	for _, p := range union(keys(got), keys(ref.tree)) {
		if got[p] != ref.tree[p] {
			t.Errorf("%s: %s, uncrashed run: %s", p, orAbsent(got[p]), orAbsent(ref.tree[p]))
		}
	}
	if sc.mode == "team" {
		if b := boardOf(t, sc, home, dir); b != ref.board {
			t.Errorf("the board and assignments differ from the uncrashed run's:\n%s\nuncrashed:\n%s", b, ref.board)
		}
	}

	// No user message delivered twice: in the record, and in the histories.
	delivered := map[string]int{}
	for _, e := range evs {
		if e.Type == "message" {
			var m struct{ ID string }
			e.Decode(&m)
			delivered[m.ID]++
		}
	}
	for id, n := range delivered {
		if n > 1 {
			t.Errorf("message %s was delivered %d times", id, n)
		}
	}
	for _, id := range sent {
		if id == "" || delivered[id] == 0 {
			t.Logf("message %q was not delivered (sent after the coordinator's last model call)", id)
		}
	}
	agents, err := checkpoint.Agents(dir, evs)
	if err != nil {
		t.Errorf("rebuilding the histories of the final record: %v", err)
	}
	for name, a := range agents {
		for _, id := range sent {
			n := 0
			for _, m := range a.History {
				if strings.HasPrefix(m.Content, "[user message "+id+" ") {
					n++
				}
			}
			if n > 1 {
				t.Errorf("message %s is %d times in %s's history", id, n, name)
			}
		}
	}
	if t.Failed() {
		t.Logf("kill points of this case:\n%s", strings.Join(mapSlice(kills, killPoint.String), "\n"))
	}
}

// tree hashes the regular files under the run's outputs and workspace.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, plane := range []string{"outputs", "workspace"} {
		root := filepath.Join(dir, plane)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:8]) + " " + quoteShort(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// boardOf is `apodex board` for a team run, without the header line that
// names the run and its last seq.
func boardOf(t *testing.T, sc *scenario, home, dir string) string {
	t.Helper()
	if sc.mode != "team" {
		return ""
	}
	c := startChild(t, "board", "--home", home, filepath.Base(dir))
	if code := c.exitCode(); code != 0 {
		t.Fatalf("apodex board: exit %d\n%s", code, c.output())
	}
	_, rest, _ := strings.Cut(c.out.String(), "\n")
	return rest
}

func quoteShort(b []byte) string {
	if len(b) > 40 {
		b = append(b[:37:37], "..."...)
	}
	q, _ := json.Marshal(string(b))
	return string(q)
}

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
