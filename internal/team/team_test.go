package team_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/team"
)

// TestLeadScenario is the integration scenario with the scripted
// model: a lead adds three items (the third depending on the other two), is
// refused an early dispatch and an early finish, dispatches two subagents,
// waits, resolves, dispatches the third, and finishes. Everything is
// asserted from the record and the shared workspace.
func TestLeadScenario(t *testing.T) {
	h := newHarness(t)
	var saw flags
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			return calls(
				add("Alpha", "Write /workspace/a1.txt"),
				add("Beta", "Write /workspace/a2.txt"),
				add("Combine", "Write /workspace/combined.txt from both", "T1", "T2")), nil
		case 1:
			return calls(dispatch("T3", "combiner")), nil // too early: T1, T2 open
		case 2:
			return calls(finish("too early")), nil // nothing is resolved
		case 3:
			return calls(dispatch("T1", "alpha writer", "write_file", "read_file"),
				dispatch("T2", "beta writer", "write_file", "read_file")), nil
		}
		switch {
		case !seen(req, "Assignment A1 (") || !seen(req, "Assignment A2 ("):
			return calls(wait("A1", "A2")), nil
		case called(req, "board_view") == 0:
			return calls(call("board_view", nil)), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1", "/workspace/a1.txt"), resolve("T2", "report:A2", "/workspace/a2.txt")), nil
		case called(req, "dispatch") == 3:
			return calls(dispatch("T3", "combiner", "read_file", "write_file")), nil
		case !seen(req, "Assignment A3 ("):
			return calls(wait("A3")), nil
		case called(req, "board_resolve") == 2:
			return calls(resolve("T3", "report:A3")), nil
		}
		return calls(finish("alpha and beta combined")), nil
	}
	// checkPrivate records whether the shared workspace already holds the
	// file the subagent just wrote in its own worktree (it must not).
	checkPrivate := func(id, name string) func(int, *llm.Request) (*llm.Response, error) {
		return func(turn int, req *llm.Request) (*llm.Response, error) {
			if turn == 0 {
				return calls(writeFile("/workspace/"+name, id+" was here\n")), nil
			}
			if _, err := os.Stat(h.host("/workspace/" + name)); err == nil {
				saw.set(id+" leaked", "the shared workspace had "+name+" before "+id+" reported")
			}
			return calls(report(id+" wrote "+name, "/workspace/"+name)), nil
		}
	}
	combiner := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			saw.set("A3 task", req.Messages[1].Content)
			return calls(readFile("/workspace/a1.txt"), readFile("/workspace/a2.txt")), nil
		case 1:
			if !seen(req, "A1 was here") || !seen(req, "A2 was here") {
				saw.set("A3 merged view", scripted.LastObservation(req))
			}
			return calls(writeFile("/workspace/combined.txt", "A1 was here\nA2 was here\n")), nil
		}
		return calls(report("combined both", "/workspace/combined.txt")), nil
	}
	model := scripted.New(byAgent(map[string]scripted.Policy{
		"lead": lead, "A1": checkPrivate("A1", "a1.txt"), "A2": checkPrivate("A2", "a2.txt"), "A3": combiner,
	}))
	out := h.run(model, func(c *team.Config) { c.Isolation = team.PerAgent })

	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v); want completed", out.Termination, out.Err)
	}

	// Board ids and dependencies.
	evs, _ := h.boardEvents()
	var adds []board.Event
	for _, e := range evs {
		if e.Op == board.OpAdd {
			adds = append(adds, e)
		}
	}
	if len(adds) != 3 {
		t.Fatalf("want 3 board adds, got %d", len(adds))
	}
	for i, want := range []string{"T1", "T2", "T3"} {
		if adds[i].ID != want || adds[i].By != "lead" {
			t.Errorf("add %d: id %s by %q; want %s by lead", i, adds[i].ID, adds[i].By, want)
		}
	}
	if !slices.Equal(adds[2].Deps, []string{"T1", "T2"}) || len(adds[0].Deps)+len(adds[1].Deps) != 0 {
		t.Errorf("deps: T1 %v, T2 %v, T3 %v; want none, none, [T1 T2]", adds[0].Deps, adds[1].Deps, adds[2].Deps)
	}
	if r := h.nth("lead", "board_add", 2); !strings.Contains(r.Output, "T3") {
		t.Errorf("board_add did not return the id: %q", r.Output)
	}

	// The refusals name what is missing.
	wantRefused(t, "the early dispatch of T3", h.nth("lead", "dispatch", 0), "T1 (open)", "T2 (open)")
	wantRefused(t, "the early finish", h.nth("lead", "finish", 0), `T1 "Alpha" is open`, `T2 "Beta" is open`, `T3 "Combine" is open`)
	if got := h.assignments("A4"); len(got) != 0 {
		t.Errorf("an assignment beyond A3 exists: %v", got)
	}

	// Each assignment's lifecycle, in order.
	for _, id := range []string{"A1", "A2", "A3"} {
		wantLifecycle(t, h, id, team.Created, team.Queued, team.Running, team.Reported)
	}
	if a := h.assignments("A1")[0]; a.Item != "T1" || a.Role != "alpha writer" || !slices.Equal(a.Tools, []string{"write_file", "read_file"}) {
		t.Errorf("A1 created as %+v; want item T1, the lead's role and tools", a)
	}

	// Reports attach to their items and do not resolve them.
	for item, ref := range map[string]string{"T1": "report:A1", "T2": "report:A2", "T3": "report:A3"} {
		found := false
		for _, e := range evs {
			found = found || (e.Op == board.OpAttach && e.ID == item && slices.Contains(e.Refs, ref))
		}
		if !found {
			t.Errorf("no board attach of %s to %s", ref, item)
		}
	}
	_, seqs := h.boardEvents()
	firstResolve := int64(0)
	for i, e := range evs {
		if e.Op == board.OpResolve {
			firstResolve = seqs[i]
			break
		}
	}
	before := h.boardAt(firstResolve)
	for _, id := range []string{"T1", "T2"} {
		it := h.item(before, id)
		if !it.State.Active() {
			t.Errorf("%s was %s before the lead resolved it; a report alone must not resolve", id, it.State)
		}
		if !slices.Contains(it.Refs, "report:A"+id[1:]) {
			t.Errorf("%s refs before resolve = %v; want its report", id, it.Refs)
		}
	}
	if v := h.nth("lead", "board_view", 0).Output; !strings.Contains(v, "0 resolved") {
		t.Errorf("board_view after both reports shows something resolved:\n%s", v)
	}
	if r := h.nth("lead", "board_resolve", 1); !strings.Contains(r.Output, "now ready: T3") {
		t.Errorf("resolving T2 did not say T3 is now ready: %q", r.Output)
	}
	final := h.boardAt(0)
	for _, id := range []string{"T1", "T2", "T3"} {
		if it := h.item(final, id); it.State != board.Resolved {
			t.Errorf("%s ends %s; want resolved", id, it.State)
		}
	}

	// The dependent's first message carries its dependencies' reports.
	task := saw.get("A3 task")
	for _, want := range []string{"Report of A1 on T1", "A1 wrote a1.txt", "Report of A2 on T2", "A2 wrote a2.txt", "Objective: Write /workspace/combined.txt"} {
		if !strings.Contains(task, want) {
			t.Errorf("A3's first message lacks %q:\n%s", want, task)
		}
	}

	// Per-agent isolation, then the merge.
	for _, k := range []string{"A1 leaked", "A2 leaked", "A3 merged view"} {
		if v := saw.get(k); v != "" {
			t.Errorf("%s: %s", k, v)
		}
	}
	for name, want := range map[string]string{"a1.txt": "A1 was here\n", "a2.txt": "A2 was here\n", "combined.txt": "A1 was here\nA2 was here\n"} {
		if got := readHost(t, h.host("/workspace/"+name)); got != want {
			t.Errorf("merged /workspace/%s = %q; want %q", name, got, want)
		}
	}
	merges := decode[struct {
		Assignment string           `json:"assignment"`
		Applied    []map[string]any `json:"applied"`
		Conflicts  []map[string]any `json:"conflicts"`
	}](t, h.events, record.TypeMerge)
	if len(merges) != 3 {
		t.Errorf("want 3 merge events, got %d", len(merges))
	}
	for _, m := range merges {
		if len(m.Applied) != 1 || len(m.Conflicts) != 0 {
			t.Errorf("merge of %s: applied %v, conflicts %v; want one change, no conflict", m.Assignment, m.Applied, m.Conflicts)
		}
	}

	// The final gate let the last finish through.
	fin := h.results("lead", "finish")
	wantOK(t, "the last finish", fin[len(fin)-1])
	if out.Summary != "alpha and beta combined" {
		t.Errorf("summary = %q", out.Summary)
	}
}
