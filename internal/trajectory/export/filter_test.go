package export

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/trajectory"
)

type ev struct {
	typ, agent string
	p          any
}

func runOf(t *testing.T, evs ...ev) *trajectory.Run {
	t.Helper()
	dir := t.TempDir()
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	for _, e := range evs {
		if _, err := l.Append(e.typ, e.agent, e.p); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	r, err := trajectory.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func callEv(id, name, args string) ev {
	return ev{record.TypeToolCall, "main", record.ToolCall{CallID: id, Name: name, Arguments: args}}
}
func resultEv(id, name string, isErr bool) ev {
	return ev{record.TypeToolResult, "main", record.ToolResult{CallID: id, Name: name, IsError: isErr, Output: "error: no such file"}}
}

func TestIgnoredObservation(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []ev
		want int
	}{
		{"repeated unchanged", []ev{callEv("1", "read_file", `{"path":"/a"}`), resultEv("1", "read_file", true), callEv("2", "read_file", `{ "path": "/a" }`), resultEv("2", "read_file", true)}, 1},
		{"changed arguments", []ev{callEv("1", "read_file", `{"path":"/a"}`), resultEv("1", "read_file", true), callEv("2", "read_file", `{"path":"/b"}`), resultEv("2", "read_file", false)}, 0},
		{"a file changed between", []ev{callEv("1", "read_file", `{"path":"/a"}`), resultEv("1", "read_file", true),
			{record.TypeFileDelta, "main", record.FileDelta{Path: "/a"}}, callEv("2", "read_file", `{"path":"/a"}`), resultEv("2", "read_file", false)}, 0},
		{"after success", []ev{callEv("1", "read_file", `{"path":"/a"}`), resultEv("1", "read_file", false), callEv("2", "read_file", `{"path":"/a"}`), resultEv("2", "read_file", false)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IgnoredObservations(runOf(t, tc.evs...)); len(got) != tc.want {
				t.Errorf("%v, want %d", got, tc.want)
			}
		})
	}
}

func TestInconsistentAndInvalid(t *testing.T) {
	r := runOf(t, callEv("1", "bash", `not json`), resultEv("1", "bash", true), resultEv("1", "bash", true), resultEv("9", "bash", false),
		callEv("2", "bash", `{}`), ev{record.TypeRunFinished, "", record.RunFinished{Status: "failed"}})
	got := strings.Join(Inconsistent(r), "\n")
	for _, want := range []string{"answered twice", "never made", "call 2 of main never answered"} {
		if !strings.Contains(got, want) {
			t.Errorf("inconsistencies lack %q:\n%s", want, got)
		}
	}
	if inv := InvalidTools(r); len(inv) != 1 || !strings.Contains(inv[0], "not a JSON object") {
		t.Errorf("invalid tools %v", inv)
	}
}

func TestParseMinGrade(t *testing.T) {
	f := Filter{MinTotal: -1}
	if err := ParseMinGrade("30,evidence=6", &f); err != nil || f.MinTotal != 30 || f.MinCapability["evidence"] != 6 {
		t.Errorf("%v %+v", err, f)
	}
	if err := ParseMinGrade("evidence=x", &f); err == nil || !strings.Contains(err.Error(), "CAPABILITY=N") {
		t.Errorf("bad value: %v", err)
	}
}
