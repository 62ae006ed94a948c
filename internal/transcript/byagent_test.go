package transcript

import (
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
