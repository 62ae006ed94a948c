package transcript

import (
	"fmt"
	"strings"
	"testing"
)

func TestByAgent(t *testing.T) {
	var in []Entry
	for i, a := range []string{"", "lead", "A1", "lead", "user", "A1", "runtime"} {
		in = append(in, Entry{Seq: int64(i + 1), Agent: a})
	}
	var got []string
	for _, x := range ByAgent(in) {
		got = append(got, x.Agent+":"+string(rune('0'+x.Seq)))
	}
	want := ":1 lead:2 lead:4 A1:3 A1:6 user:5 runtime:7"
	if strings.Join(got, " ") != want {
		t.Errorf("ByAgent = %s; want %s", strings.Join(got, " "), want)
	}
}

// A resume is a note in the section of each agent under way across it,
// after the call it cut off (interrupted), not at the end of the transcript.
func TestByAgentPutsAResumeInPlace(t *testing.T) {
	in := []Entry{
		{Seq: 1, Kind: KindRunStarted},
		{Seq: 2, Agent: "lead", Kind: KindToolCall},
		{Seq: 3, Agent: "A1", Kind: KindToolCall},
		{Seq: 4, Agent: "done", Kind: KindAssistant},
		{Seq: 5, Agent: "A1", Kind: KindInterrupted},
		{Seq: 5, Kind: KindResumed},
		{Seq: 6, Agent: "A1", Kind: KindAssistant},
		{Seq: 7, Agent: "lead", Kind: KindAssistant},
		{Seq: 8, Kind: KindRunFinished},
	}
	var got []string
	for _, x := range ByAgent(in) {
		got = append(got, fmt.Sprintf("%s:%s", x.Agent, x.Kind))
	}
	want := ":run_started lead:tool_call lead:resumed lead:assistant A1:tool_call A1:interrupted A1:resumed A1:assistant done:assistant :run_finished"
	if strings.Join(got, " ") != want {
		t.Errorf("ByAgent =\n %s\nwant\n %s", strings.Join(got, " "), want)
	}
	// No agent spans it: it stays among the run's own entries.
	in = []Entry{{Seq: 1, Agent: "main", Kind: KindAssistant}, {Seq: 2, Kind: KindResumed}, {Seq: 3, Kind: KindRunFinished}}
	if out := ByAgent(in); len(out) != 3 || out[1].Kind != KindResumed {
		t.Errorf("ByAgent = %+v", out)
	}
}
