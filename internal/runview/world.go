package runview

import (
	"fmt"
	"path/filepath"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// RecordedWorld is the world a run's run_started names, if any.
func RecordedWorld(rs record.RunStarted) (record.World, bool) {
	if rs.Settings == nil || rs.Settings.World == nil || rs.Settings.World.ID == "" {
		return record.World{}, false
	}
	return *rs.Settings.World, true
}

// homeOf is the apodex home of the run in dir (<home>/runs/<id>).
func homeOf(dir string) string { return filepath.Dir(filepath.Dir(dir)) }

// worldProblems says why a world run's initial state cannot be rebuilt:
// its world is no longer stored, or no longer intact, or came from another
// generator version. staged, when not nil and the recorded world, is used
// instead of loading it from the store again.
func worldProblems(dir string, rs record.RunStarted, staged *Staged) []string {
	rw, ok := RecordedWorld(rs)
	if !ok {
		return nil
	}
	var w *world.World
	var intact error
	if staged != nil && staged.World.ID == rw.ID && filepath.Dir(staged.World.Dir) == filepath.Join(homeOf(dir), "worlds") {
		w, intact = staged.World, staged.Intact
	} else {
		var err error
		if w, err = world.NewStore(homeOf(dir)).Get(rw.ID); err != nil {
			return []string{fmt.Sprintf("the initial state cannot be rebuilt: world %s: %v", rw.ID, err)}
		}
		intact = w.Intact() // its seal: a stat of each file, no read
	}
	if w.ID != rw.ID || intact != nil {
		return []string{fmt.Sprintf("the initial state cannot be rebuilt: the stored world %s was modified", rw.ID)}
	}
	if w.Gen.Version != rw.Generator.Version {
		return []string{fmt.Sprintf("the initial state cannot be rebuilt: world %s is generator version %s, the run recorded %s", rw.ID, w.Gen.Version, rw.Generator.Version)}
	}
	return nil
}
