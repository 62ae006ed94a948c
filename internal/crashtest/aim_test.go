package crashtest

import (
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrashAt kills each scenario once at each of the moments a drawn
// event count rarely hits because they last microseconds, so that every
// run of the package covers them: a model call in flight, a user message
// recorded (before its delivery mark), the lease just granted, a subagent
// merged but not reported, a lead coordination call whose effect is
// recorded but not its result, a subagent's file-changing call whose
// result is recorded but not its file_delta, the finalization, an atomic
// file replacement in flight (its temporary file exists). A moment missed
// five times (the run ended first) is logged, not failed.
func TestCrashAt(t *testing.T) {
	needApodex(t)
	cases := []struct {
		sc  *scenario
		aim string
	}{
		{reactScenario, "model"},
		{reactScenario, "message"},
		{reactScenario, "lease"},
		{reactScenario, "finalization"},
		{reactScenario, "temp"},
		{teamScenario, "model"},
		{teamScenario, "lease"},
		{teamScenario, "merge"},
		{teamScenario, "coordination"},
		{teamScenario, "delta"},
		{teamScenario, "finalization"},
		{teamScenario, "temp"},
	}
	base := uint64(envInt(t, "APODEX_CRASH_SEED", 1))
	for i, c := range cases {
		t.Run(c.sc.name+"/"+c.aim, func(t *testing.T) {
			args, ref := c.sc.setup(t)
			for attempt := range uint64(5) {
				seed := base*100_000 + 90_000 + uint64(i)*10 + attempt
				if kills := crashCase(t, c.sc, ref, args, seed, c.aim); len(kills) > 0 {
					return
				}
				t.Logf("attempt %d (seed %d): the run ended before a kill landed at %s", attempt+1, seed, c.aim)
			}
			t.Logf("no kill landed at %s in 5 attempts; the moment is shorter than the harness's step", c.aim)
		})
	}
}

// aimAt draws what the next kill aims at and the event count from which
// it may land. Most kills land after a number of events drawn over the
// uncrashed run's length; the rest wait, from a drawn point or from the
// start of the process, for a moment that a plain count rarely hits
// because it lasts microseconds: a model call or a tool call in flight, a
// slow bash command running, the lease just granted, a merged worktree
// whose report is not recorded yet, the finalization after finish, a lead
// coordination call (board_add, dispatch, board_resolve) whose effect is
// recorded and whose result is not, a subagent's file-changing call whose
// result is recorded and whose file_delta is not.
func aimAt(rng *rand.Rand, sc *scenario, ref *reference, start int) (aim string, target int) {
	span := max(ref.events-start, 1)
	aims := []struct {
		name   string
		weight int
	}{{"events", 34}, {"model", 14}, {"tool", 10}, {"bash", 12}, {"lease", 8}, {"finalization", 6}, {"merge", 6}, {"coordination", 5}, {"delta", 5}}
	if sc.mode != "team" {
		aims[6].name, aims[7].name, aims[8].name = "events", "events", "events"
	}
	r := rng.IntN(100)
	for _, a := range aims {
		if r -= a.weight; r < 0 {
			aim = a.name
			break
		}
	}
	switch aim {
	case "events":
		return aim, start + 1 + rng.IntN(span)
	case "model", "tool", "bash":
		return aim, start + 1 + rng.IntN(max(span/2, 1))
	}
	return aim, start + 1
}

// aimed reports whether the frozen process is at the moment aim wants.
func aimed(aim string, w *watch, m moment, sc *scenario, runDir string) bool {
	switch aim {
	case "model":
		return m.modelInFlight
	case "tool":
		return len(m.toolsInFlight) > 0
	case "bash":
		return slowBashInFlight(w, sc.slow)
	case "lease":
		return m.leaseGranted || m.claimPending
	case "merge":
		return m.merging
	case "finalization":
		return m.finalizing
	case "coordination":
		return m.coordinating
	case "temp":
		return len(tempFiles(runDir)) > 0
	case "delta":
		return m.deltaPending
	case "message":
		n := len(w.events)
		return n > 0 && w.events[n-1].Type == "message"
	}
	return true
}

// tempFiles lists the runtime's temporary files (".name.apodex-…", made
// by an atomic replacement or a worktree merge) under the run's planes.
func tempFiles(runDir string) []string {
	var out []string
	for _, plane := range []string{"workspace", "outputs"} {
		filepath.WalkDir(filepath.Join(runDir, plane), func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".") && strings.Contains(d.Name(), ".apodex-") {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// slowBashInFlight: a bash call carrying the slow marker has no result yet.
func slowBashInFlight(w *watch, marker string) bool {
	for _, c := range w.inFlight() {
		if strings.Contains(c, ":bash:") && strings.Contains(c, marker) {
			return true
		}
	}
	return false
}
