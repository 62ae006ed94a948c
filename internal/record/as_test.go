package record

import "testing"

func TestAs(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(TypeRunFinished, "", RunFinished{Status: "completed"})
	l.Append(TypeWarning, "", Warning{Code: "x"})
	l.Append(TypeRunFinished, "", map[string]any{"status": 7})
	c, err := Read(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if rf, ok := As[RunFinished](c.Events[0]); !ok || rf.Status != "completed" {
		t.Errorf("As[RunFinished] of a run_finished: %v %v", rf, ok)
	}
	if _, ok := As[RunFinished](c.Events[1]); ok {
		t.Error("As[RunFinished] of a warning")
	}
	if _, ok := As[RunFinished](c.Events[2]); ok {
		t.Error("As[RunFinished] of a payload that does not decode")
	}
}
