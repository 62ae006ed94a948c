package eval

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCollectorKeepsOneLinePerRollout: a result that arrives twice (a
// redelivered rollout) gets one line, and Pending leaves out what is
// scored, also after a reopen.
func TestCollectorKeepsOneLinePerRollout(t *testing.T) {
	home := t.TempDir()
	plan := &Plan{ID: "e-1", Worlds: []PlanWorld{{ID: "w-a"}, {ID: "w-b"}}, Configs: []Config{{Name: "c"}}, Rollouts: 2}
	if err := os.MkdirAll(Dir(home, plan.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	if n := len(Pending(plan, nil, "v")); n != 4 {
		t.Fatalf("pending %d, want 4", n)
	}
	opts := Options{Home: home}
	c, err := OpenCollector(opts, plan)
	if err != nil {
		t.Fatal(err)
	}
	r := Result{World: "w-a", Config: "c", Rollout: 1, Status: "completed", FinishedAt: time.Now()}
	for i, want := range []bool{true, false} {
		if added, err := c.Add(r); err != nil || added != want {
			t.Fatalf("add #%d: added %v, %v; want %v", i, added, err, want)
		}
	}
	c.Close()
	// A torn tail from a kill is dropped on reopen; the scored line stays.
	f, _ := os.OpenFile(filepath.Join(Dir(home, plan.ID), ResultsFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"world":"w-b","con`)
	f.Close()
	c, err = OpenCollector(opts, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if added, _ := c.Add(r); added || c.Done() != 1 {
		t.Fatalf("after reopen: added %v, done %d", added, c.Done())
	}
	done, _ := ReadResults(home, plan.ID)
	pend := Pending(plan, done, "v")
	if len(pend) != 3 {
		t.Fatalf("pending %d, want 3", len(pend))
	}
	for _, j := range pend {
		if j.Key() == r.Key() {
			t.Fatalf("scored rollout %s is pending", j.Key())
		}
	}
}
