package crashtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// TestCrashReact kills a single-agent run at random points and resumes it.
func TestCrashReact(t *testing.T) { crashTest(t, reactScenario) }

// TestCrashTeam kills a team run (a lead, three subagents in their own
// worktrees) at random points and resumes it.
func TestCrashTeam(t *testing.T) { crashTest(t, teamScenario) }

// slice is how long a frozen child runs between two looks at its record.
var slice = time.Duration(envDefault("APODEX_CRASH_SLICE_US", 2)) * time.Microsecond

// aimedSlice is the step of TestCrashAt: thaw and freeze back to back.
const aimedSlice = 0

func crashTest(t *testing.T, sc *scenario) {
	needApodex(t)
	points := envInt(t, "APODEX_CRASH_POINTS", 12)
	base := uint64(envInt(t, "APODEX_CRASH_SEED", 1))
	args, ref := sc.setup(t)
	cov := &coverage{}
	for i := uint64(0); cov.kills < points && i < uint64(10*points+100); i++ {
		seed := base*100_000 + i
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			kills := crashCase(t, sc, ref, args, seed, "")
			cov.add(kills)
			if t.Failed() {
				t.Logf("reproduce: APODEX_CRASH_SEED=%d go test -run '^%s$' -v ./internal/crashtest/ (the kill lands at the same aim; the exact event may vary with the scheduler)", base, t.Name())
			}
		})
	}
	cov.report(t)
}

// killPoint is where one process was killed.
type killPoint struct {
	process  int    // 0 the run, 1 its first resume, …
	aim      string // what the kill was aimed at (see aimAt)
	target   int    // the kill point drawn: after this many events
	lines    int    // complete events in the record at the kill
	prefix   []byte // those lines
	last     string // the events just before the kill
	cats     []string
	midBash  bool
	torn     bool // a torn fragment was appended after the kill
	finished bool // the record already ended with run_finished
}

func (k killPoint) String() string {
	s := fmt.Sprintf("process %d killed after event %d (aim: %s from event %d) (%s) [%s]", k.process, k.lines, k.aim, k.target, k.last, strings.Join(k.cats, ", "))
	if k.midBash {
		s += " mid-bash"
	}
	if k.torn {
		s += " +torn tail"
	}
	return s
}

// crashCase runs the scenario once, killing it 1–3 times (a resume may be
// killed in turn), and checks the end state. It returns the kill points.
// With aim set, it kills once, at the first moment aim names (see aimed).
func crashCase(t *testing.T, sc *scenario, ref *reference, args func(string) []string, seed uint64, aim string) []killPoint {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	home := t.TempDir()
	if os.Getenv("APODEX_CRASH_KEEP") != "" { // keep the runs for a look
		home, _ = os.MkdirTemp("", "apodex-crash-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
		t.Logf("runs kept under %s", home)
	}
	crashes := 1
	switch r := rng.IntN(10); {
	case r < 1:
		crashes = 3
	case r < 4:
		crashes = 2
	}
	step := slice
	if aim != "" {
		crashes = 1
		step = min(slice, aimedSlice) // the aimed moments last microseconds
	}
	var (
		kills   []killPoint
		sent    []string // message ids
		pending []*child // apodex say sent while the run was live
	)
	liveAt := 1 + rng.IntN(ref.events) // send a message while live once the record holds this many events
	if aim == "message" {
		liveAt = 2
	}
	proc := startChild(t, args(home)...)
	runDir, w := "", (*watch)(nil)
	start := 0 // events when the current process started
	for process := 0; ; process++ {
		target, aim := 0, aim
		switch {
		case len(kills) >= crashes:
			aim = ""
		case aim != "":
			target = 1
		default:
			aim, target = aimAt(rng, sc, ref, start)
		}
		if target == 0 && liveAt == 0 {
			break // nothing more to do but let it end
		}
		coord := sc.coordinator()
		stopped := proc.runUntil(t, step, func() bool {
			if runDir == "" {
				if runDir = findRun(home); runDir == "" {
					return false
				}
				w = newWatch(runDir)
				w.changers = ref.changers
			}
			if err := w.read(); err != nil && !os.IsNotExist(err) {
				t.Fatalf("process %d: %v", process, err)
			}
			if liveAt > 0 && w.lines() >= liveAt && !w.finished() {
				liveAt = 0
				pending = append(pending, startChild(t, "say", "--home", home, filepath.Base(runDir), fmt.Sprintf("btw, crash-test note %d (sent live)", len(sent)+len(pending)+1)))
			}
			return target > 0 && w.lines() >= target && aimed(aim, w, w.moment(coord), sc, runDir)
		})
		if !stopped {
			break // the process ended by itself
		}
		if aim == "bash" { // let the command run a while, then kill
			proc.thaw()
			time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond)
			if !proc.freeze(t) {
				break
			}
		}
		proc.kill()
		if err := w.read(); err != nil {
			t.Fatalf("after the kill: %v", err)
		}
		kp := killPoint{process: process, aim: aim, target: target, lines: w.lines(), prefix: bytes.Clone(w.data), last: w.lastTypes(2),
			cats: w.categories(coord), midBash: aim == "bash" && slowBashInFlight(w, sc.slow), finished: w.finished()}
		noStrays(t, runDir)
		if !kp.finished && rng.IntN(4) == 0 {
			tearTail(t, w)
			kp.torn = true
		}
		kills = append(kills, kp)
		t.Logf("%v", kp)
		if kp.finished {
			break // killed after its last event: nothing to resume
		}
		n := 0
		if len(kills) == 1 {
			n = 2
		} else if rng.IntN(2) == 0 {
			n = 1
		}
		for range n {
			say := startChild(t, "say", "--home", home, filepath.Base(runDir), fmt.Sprintf("btw, crash-test note %d (sent while stopped)", len(sent)+len(pending)+1))
			if code := say.exitCode(); code != 0 {
				t.Fatalf("apodex say to a stopped run: exit %d\n%s", code, say.output())
			}
			sent = append(sent, strings.TrimSpace(say.out.String()))
		}
		proc = startChild(t, "resume", "--home", home, filepath.Base(runDir), "--quiet")
		start = kp.lines
	}
	if len(kills) == 0 || !kills[len(kills)-1].finished {
		select {
		case <-proc.done:
		case <-time.After(2 * time.Minute):
			proc.kill()
			t.Fatalf("the last process did not end within 2 minutes\n%s", proc.output())
		}
		if code := proc.exitCode(); code != 0 {
			t.Errorf("the last process exited %d, want 0:\n%s", code, proc.output())
		}
	}
	for _, say := range pending {
		if code := say.exitCode(); code != 0 {
			// The run may have finished between the look and the send.
			if !strings.Contains(say.errOut.String(), "has finished") {
				t.Errorf("apodex say to the live run: exit %d\n%s", code, say.output())
			}
			continue
		}
		id, _, _ := strings.Cut(say.out.String(), "\n")
		sent = append(sent, strings.TrimSpace(id))
	}
	if runDir == "" {
		t.Fatal("the run directory never appeared")
	}
	checkRun(t, sc, ref, home, runDir, kills, sent)
	return kills
}

func findRun(home string) string {
	dirs, _ := filepath.Glob(filepath.Join(home, "runs", "*", record.EventsFile))
	if len(dirs) != 1 {
		return ""
	}
	return filepath.Dir(dirs[0])
}

// tearTail appends the first part of a next event, as a process that lost
// power in the middle of a write leaves it.
func tearTail(t *testing.T, w *watch) {
	t.Helper()
	last := w.events[len(w.events)-1]
	frag := fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","type":"tool_result","agent":%q,"output":"half a li`, last.Seq+1, last.Agent)
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(frag); err != nil {
		t.Fatal(err)
	}
}

func (sc *scenario) coordinator() string {
	if sc.mode == "team" {
		return "lead"
	}
	return "main"
}

// coverage tallies what the kills interrupted, over a test's cases.
type coverage struct {
	kills int
	cats  map[string]int
	last  map[string]int
}

func (c *coverage) add(kills []killPoint) {
	if c.cats == nil {
		c.cats, c.last = map[string]int{}, map[string]int{}
	}
	c.kills += len(kills)
	for _, k := range kills {
		for _, cat := range k.cats {
			c.cats[cat]++
		}
		if k.midBash {
			c.cats["killed mid-bash (slow command)"]++
		}
		if k.torn {
			c.cats["torn tail repaired"]++
		}
		if k.process > 0 {
			c.cats["resume of a resume"]++
		}
		last := k.last
		if i := strings.LastIndex(last, " → "); i >= 0 {
			last = last[i+len(" → "):]
		}
		c.last[last]++
	}
}

func (c *coverage) report(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d kill points; what they interrupted:\n", c.kills)
	for _, k := range keys(c.cats) {
		fmt.Fprintf(&b, "  %4d  %s\n", c.cats[k], k)
	}
	b.WriteString("the event just before each kill:\n")
	for _, k := range keys(c.last) {
		fmt.Fprintf(&b, "  %4d  %s\n", c.last[k], k)
	}
	t.Log(b.String())
}
