package replay

import "testing"

func TestEnvelopeAndStepLines(t *testing.T) {
	for _, c := range []struct {
		line, typ, agent string
		ok               bool
	}{
		{`{"seq":3,"time":"2026-01-01T00:00:00Z","type":"tool_result","agent":"A1","name":"wait"}`, "tool_result", "A1", true},
		{`{"seq":3,"time":"2026-01-01T00:00:00Z","type":"run_started","agent":"","x":1}`, "run_started", "", true},
		{`{"agent":"lead","type":"board","seq":9}`, "board", "lead", true}, // not the record's order: decoded in full
		{`not json`, "", "", false},
	} {
		typ, agent, ok := envelope([]byte(c.line))
		if typ != c.typ || agent != c.agent || ok != c.ok {
			t.Errorf("envelope(%s) = %q %q %v", c.line, typ, agent, ok)
		}
	}
	if a, ok := stepAgent([]byte("[A12] turn 3 bash {} -> ok exit code: 0\n")); !ok || a != "A12" {
		t.Errorf("stepAgent: %q %v", a, ok)
	}
	if _, ok := stepAgent([]byte("apodex: run x with replay model\n")); ok {
		t.Error("a run line read as a step")
	}
}
