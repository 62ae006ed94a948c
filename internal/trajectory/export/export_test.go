package export

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadRolloutsLeavesTornLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "results.jsonl")
	whole := `{"run_id":"r-1","world":"w","config":"c","status":"completed","score":0.5,"verified":true}` + "\n"
	if err := os.WriteFile(p, []byte(whole+`{"run_id":"r-2"`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, off, err := ReadRollouts(dir, 0)
	if err != nil || len(got) != 1 || off != int64(len(whole)) {
		t.Fatalf("ReadRollouts = %+v, %d, %v; want one rollout ending at %d", got, off, err, len(whole))
	}
	r := got[0]
	if r.RunID != "r-1" || r.Ctx.World != "w" || r.Ctx.Config != "c" || r.Status != "completed" || r.Ctx.Scores["score"] != 0.5 || r.Ctx.Scores["verified"] != true {
		t.Errorf("rollout = %+v", r)
	}
	if err := os.WriteFile(p, []byte(whole+`{"run_id":"r-2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err = ReadRollouts(dir, off)
	if err != nil || len(got) != 1 || got[0].RunID != "r-2" {
		t.Fatalf("after completion: %+v, %v; want r-2", got, err)
	}
}

func TestParseDrop(t *testing.T) {
	d, err := ParseDrop("invalid-tool, not-trainable")
	if err != nil || !d[DropInvalidTool] || !d[DropNotTrainable] || len(d) != 2 {
		t.Fatalf("ParseDrop = %v, %v", d, err)
	}
	if _, err := ParseDrop("invalid-tool,nope"); err == nil {
		t.Fatal("ParseDrop accepted an unknown name")
	}
}

func TestUseGradesRejectsUnknownCapability(t *testing.T) {
	f := Filter{MinCapability: map[string]int{"no-such-capability": 3}}
	if err := UseGrades(&f); err == nil || f.GradeOf != nil {
		t.Fatalf("UseGrades = %v; want an error and no GradeOf", err)
	}
}
