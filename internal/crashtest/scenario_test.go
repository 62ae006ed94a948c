package crashtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// scenario is a task and a scripted policy whose every step is idempotent:
// files are written whole (never appended), so a step replayed after a
// crash leaves the state it would have left once.
type scenario struct {
	name   string
	mode   string            // react or team
	script string            // the scripted policy (JSON)
	task   string            // task.yaml; inputs: ./inputs
	inputs map[string]string // name -> content
	// slow marks the bash commands that sleep, where a kill can land
	// mid-command.
	slow string
}

var (
	setupMu sync.Mutex
	setups  = map[string]*reference{}
)

// setup installs the scenario's files (once per test binary) and runs it
// once uncrashed; it returns the arguments of `apodex run` for a run under
// home and the uncrashed run's end state.
func (sc *scenario) setup(t *testing.T) (runArgs func(home string) []string, ref *reference) {
	t.Helper()
	dir := filepath.Join(workDir, sc.name)
	runArgs = func(home string) []string {
		return []string{"run", "--home", home, "--provider", "scripted", "--script", filepath.Join(dir, "script.json"),
			"--task", filepath.Join(dir, "task.yaml"), "--mode", sc.mode, "--quiet"}
	}
	setupMu.Lock()
	defer setupMu.Unlock()
	if ref := setups[sc.name]; ref != nil {
		return runArgs, ref
	}
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("script.json", sc.script)
	write("task.yaml", sc.task)
	for name, content := range sc.inputs {
		write(filepath.Join("inputs", name), content)
	}
	ref = uncrashed(t, sc, runArgs, filepath.Join(dir, "uncrashed"))
	setups[sc.name] = ref
	t.Logf("uncrashed %s run: %d events, files %v", sc.name, ref.events, keys(ref.tree))
	return runArgs, ref
}

// reactScenario: one agent, ten turns: inspect, write working files with
// write_file and bash (one slow), claim the outputs, commit them with bash
// and write_file, check, finish.
var reactScenario = &scenario{
	name: "react",
	mode: "react",
	slow: "sleep 0.3",
	inputs: map[string]string{"data.csv": "region,value,units\nnorth,1250.50,EUR\nsouth,980.25,EUR\neast,1432.00,EUR\n" +
		"west,610.75,EUR\ncentral,2045.10,EUR\nislands,318.40,EUR\n"},
	task: `objective: >
  Sum the value column of /inputs/data.csv. Deliver the number in /outputs/sum.txt,
  the sorted regions in /outputs/regions.txt and a short report in /outputs/report.md.
inputs: ./inputs
budget: {turns: 60, tool_calls: 120}
deliverables:
  - path: /outputs/sum.txt
    non_empty: true
  - path: /outputs/regions.txt
    non_empty: true
  - path: /outputs/report.md
    non_empty: true
    ext: [.md]
verify:
  - kind: recompute
    name: sum matches an independent recomputation
    command: awk -F, 'NR>1 {s+=$2} END {printf "%.2f\n", s}' /inputs/data.csv
    compare: /outputs/sum.txt
    tolerance: 1e-9
`,
	script: `{"turns": [
  {"say": "See the inputs.", "calls": [{"name": "list_files", "args": {"path": "/inputs"}}]},
  {"calls": [{"name": "read_file", "args": {"path": "/inputs/data.csv"}}]},
  {"calls": [{"name": "write_file", "args": {"path": "/workspace/plan.md", "content": "# Plan\n\n1. sum\n2. count\n3. publish\n"}}]},
  {"calls": [{"name": "bash", "args": {"command": "awk -F, 'NR>1 {s+=$2} END {printf \"%.2f\\n\", s}' /inputs/data.csv > /workspace/sum.txt && cat /workspace/sum.txt"}}]},
  {"calls": [{"name": "bash", "args": {"command": "sleep 0.3; awk -F, 'NR>1 {n++} END {print n}' /inputs/data.csv > /workspace/rows.txt && cat /workspace/rows.txt"}}]},
  {"calls": [{"name": "claim_outputs", "args": {"paths": ["/outputs/sum.txt", "/outputs/regions.txt", "/outputs/report.md"]}}]},
  {"calls": [{"name": "bash", "args": {"command": "cp /workspace/sum.txt /outputs/sum.txt && cut -d, -f1 /inputs/data.csv | tail -n +2 | sort > /outputs/regions.txt"}}]},
  {"calls": [{"name": "write_file", "args": {"path": "/outputs/report.md", "content": "# Sum of the value column\n\n6637.00 over 6 rows.\n"}},
             {"name": "write_file", "args": {"path": "/workspace/notes.md", "content": "report written\n"}}]},
  {"calls": [{"name": "bash", "args": {"command": "sleep 0.3; test \"$(cat /outputs/sum.txt)\" = 6637.00 && echo verified"}},
             {"name": "read_file", "args": {"path": "/outputs/report.md"}}]},
  {"calls": [{"name": "finish", "args": {"summary": "The value column sums to 6637.00: /outputs/sum.txt, /outputs/regions.txt and /outputs/report.md."}}]}
]}`,
}

// teamScenario: a lead and three subagents like examples/team-csv, every
// step idempotent. The lead waits twice for each assignment (the first
// wait may be cut short by a user message; the second then returns at
// once or waits for the rest).
var teamScenario = &scenario{
	name:   "team",
	mode:   "team",
	slow:   "sleep 0.3",
	inputs: map[string]string{"north.csv": "month,value\njan,120.5\nfeb,98.25\nmar,143\n", "south.csv": "month,value\njan,61.75\nfeb,80\nmar,59.5\n"},
	task: `objective: >
  Sum the value columns of /inputs/north.csv and /inputs/south.csv; deliver a
  report with both totals in /outputs/report.md and the totals in /outputs/totals.csv.
inputs: ./inputs
budget: {turns: 60, tool_calls: 120}
deliverables:
  - path: /outputs/report.md
    non_empty: true
  - path: /outputs/totals.csv
    csv_columns: [region, total]
`,
	script: `{"agents": {
  "lead": {"turns": [
    {"say": "Look at the inputs.", "calls": [{"name": "list_files", "args": {"path": "/inputs"}}]},
    {"calls": [{"name": "board_add", "args": {"title": "North total", "objective": "Sum /inputs/north.csv into /workspace/north.txt"}}]},
    {"calls": [{"name": "board_add", "args": {"title": "South total", "objective": "Sum /inputs/south.csv into /workspace/south.txt"}}]},
    {"calls": [{"name": "board_add", "args": {"title": "Report", "objective": "Deliver /outputs/report.md and /outputs/totals.csv", "deps": ["T1", "T2"]}}]},
    {"calls": [
      {"name": "dispatch", "args": {"item": "T1", "role": "north summer", "instructions": "Sum the value column of /inputs/north.csv into /workspace/north.txt and report it.", "tools": ["read_file", "bash"]}},
      {"name": "dispatch", "args": {"item": "T2", "role": "south summer", "instructions": "Sum the value column of /inputs/south.csv into /workspace/south.txt and report it.", "tools": ["read_file", "bash", "write_file"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A1"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A1"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A2"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A2"]}}]},
    {"calls": [
      {"name": "verify", "args": {"claim": "The north total is 361.75", "evidence": ["/workspace/north.txt"]}},
      {"name": "verify", "args": {"claim": "The south total is 201.25", "evidence": ["/workspace/south.txt"]}}]},
    {"calls": [
      {"name": "board_resolve", "args": {"id": "T1", "note": "north.txt holds 361.75; verified", "refs": ["report:A1", "/workspace/north.txt"]}},
      {"name": "board_resolve", "args": {"id": "T2", "note": "south.txt holds 201.25; verified", "refs": ["report:A2", "/workspace/south.txt"]}}]},
    {"calls": [{"name": "dispatch", "args": {"item": "T3", "role": "report writer", "instructions": "Claim and write /outputs/report.md and /outputs/totals.csv from the two totals.", "tools": ["read_file", "bash", "write_file", "claim_outputs"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A3"]}}]},
    {"calls": [{"name": "wait", "args": {"assignments": ["A3"]}}]},
    {"calls": [{"name": "board_resolve", "args": {"id": "T3", "note": "report delivered", "refs": ["report:A3", "/outputs/report.md"]}}]},
    {"calls": [{"name": "finish", "args": {"summary": "North 361.75 and south 201.25; the report is in /outputs/report.md."}}]}
  ]},
  "A1": {"turns": [
    {"calls": [{"name": "bash", "args": {"command": "sleep 0.3; awk -F, 'NR>1 {s+=$2} END {printf \"%.2f\\n\", s}' /inputs/north.csv > /workspace/north.txt && cat /workspace/north.txt"}}]},
    {"calls": [{"name": "report", "args": {"summary": "North total is 361.75", "claims": [{"text": "The north total is 361.75", "evidence": ["/workspace/north.txt"]}], "artifacts": ["/workspace/north.txt"]}}]}
  ]},
  "A2": {"turns": [
    {"calls": [{"name": "bash", "args": {"command": "awk -F, 'NR>1 {s+=$2} END {printf \"%.2f\\n\", s}' /inputs/south.csv > /workspace/south.txt && cat /workspace/south.txt"}}]},
    {"calls": [{"name": "write_file", "args": {"path": "/workspace/south-method.md", "content": "awk over the value column\n"}}]},
    {"calls": [{"name": "report", "args": {"summary": "South total is 201.25", "claims": [{"text": "The south total is 201.25", "evidence": ["/workspace/south.txt"]}], "artifacts": ["/workspace/south.txt", "/workspace/south-method.md"]}}]}
  ]},
  "A3": {"turns": [
    {"calls": [{"name": "claim_outputs", "args": {"paths": ["/outputs/report.md", "/outputs/totals.csv"]}}]},
    {"calls": [{"name": "bash", "args": {"command": "sleep 0.3; printf 'region,total\\nnorth,%s\\nsouth,%s\\n' $(cat /workspace/north.txt) $(cat /workspace/south.txt) > /outputs/totals.csv && cat /outputs/totals.csv"}}]},
    {"calls": [{"name": "write_file", "args": {"path": "/outputs/report.md", "content": "# Totals\n\n- north: 361.75\n- south: 201.25\n- grand total: 563.00\n"}}]},
    {"calls": [{"name": "report", "args": {"summary": "Wrote /outputs/report.md and /outputs/totals.csv", "artifacts": ["/outputs/report.md", "/outputs/totals.csv"]}}]}
  ]}
}}`,
}
