package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkReadRuns measures what reading runs costs through the built
// binary (issue #31 item 2): `apodex runs` over 200 runs, `show` of a
// 2,000-event and of a 100,000-event run, against `apodex --help` (the
// cost of starting the process). The runs are real: made by the binary
// with a scripted policy (csv-sum, the team example, and runs of many
// write_file calls), the 200 being copies of three of them. Rounds are
// interleaved (help, runs, show 2k, show 100k, then again) and the
// figures are medians of wall time over b.N rounds, with each command's
// largest peak RSS (from /usr/bin/time, when there is one).
//
//	go test -run '^$' -bench '^BenchmarkReadRuns$' -benchtime 20x -timeout 30m ./cmd/apodex/
//
// Making the 100,000-event run takes about a minute; set
// APODEX_BENCH_READ_HOME to a directory to keep the runs between calls.
func BenchmarkReadRuns(b *testing.B) {
	bin := buildApodex(b)
	base := os.Getenv("APODEX_BENCH_READ_HOME")
	if base == "" {
		base = b.TempDir()
	}
	small := filepath.Join(base, "small")
	big := filepath.Join(base, "big")
	many := filepath.Join(base, "many")
	id2k := benchRun(b, bin, small, 13)
	id100k := benchRun(b, bin, big, 660)
	if _, err := os.Stat(filepath.Join(many, "runs")); err != nil {
		seeds := append(benchSeeds(b, bin, filepath.Join(base, "seeds")), filepath.Join(small, "runs", id2k))
		if err := os.MkdirAll(filepath.Join(many, "runs"), 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 200 {
			src := seeds[i%len(seeds)]
			dst := filepath.Join(many, "runs", fmt.Sprintf("20260101-%06d-%s", i, filepath.Base(src)[16:]))
			if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
		}
	}
	cmds := []struct {
		name string
		args []string
	}{
		{"help", []string{"--help"}},
		{"runs200", []string{"runs", "--home", many}},
		{"show2k", []string{"show", "--home", small, id2k}},
		{"show100k", []string{"show", "--home", big, id100k}},
	}
	walls := make([][]time.Duration, len(cmds))
	rss := make([]int64, len(cmds))
	b.ResetTimer()
	// Peak RSS through /usr/bin/time: wait4's maxrss of a child this
	// process forks counts the pages it shared with the test binary.
	gnuTime, _ := exec.LookPath("/usr/bin/time")
	rssFile := filepath.Join(b.TempDir(), "rss")
	for range b.N {
		for i, c := range cmds {
			start := time.Now()
			if out, err := exec.Command(bin, c.args...).CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", c.name, err, out)
			}
			walls[i] = append(walls[i], time.Since(start))
			if gnuTime == "" {
				continue
			}
			if err := exec.Command(gnuTime, append([]string{"-f", "%M", "-o", rssFile, bin}, c.args...)...).Run(); err == nil {
				data, _ := os.ReadFile(rssFile)
				var kb int64
				fmt.Sscan(string(data), &kb)
				rss[i] = max(rss[i], kb)
			}
		}
	}
	b.StopTimer()
	med := func(i int) float64 { return float64(median(walls[i]).Microseconds()) / 1000 }
	for i, c := range cmds {
		b.ReportMetric(med(i), c.name+"-ms")
		b.ReportMetric(float64(rss[i])/1024, c.name+"-peakMB")
	}
	b.ReportMetric(med(1)/med(0), "runs200/help")
	b.ReportMetric(med(3)/med(2), "show100k/show2k")
}

// benchRun makes (once) a run under home of turns turns of 50 write_file
// calls each (about 150 events a turn) and returns its id.
func benchRun(b *testing.B, bin, home string, turns int) string {
	b.Helper()
	if ids, _ := os.ReadDir(filepath.Join(home, "runs")); len(ids) == 1 {
		return ids[0].Name()
	}
	type call struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	}
	var script struct {
		Turns []struct {
			Calls []call `json:"calls"`
		} `json:"turns"`
	}
	for n := range turns + 1 {
		var cs []call
		for i := range 50 {
			cs = append(cs, call{"write_file", map[string]any{"path": fmt.Sprintf("/workspace/d%d/f%d-%d.txt", n%50, n, i), "content": "x\n"}})
		}
		if n == turns {
			cs = []call{{"finish", map[string]any{"summary": "done"}}}
		}
		script.Turns = append(script.Turns, struct {
			Calls []call `json:"calls"`
		}{cs})
	}
	data, _ := json.Marshal(script)
	path := filepath.Join(b.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "--home", home, "--provider", "scripted", "--script", path, "--max-turns", "100000",
		"--max-tool-calls", "1000000", "--max-tokens", "100000000000", "--quiet", "--json", "write files").Output()
	if err != nil {
		b.Fatalf("the %d-turn run: %v", turns, err)
	}
	var s struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		b.Fatal(err)
	}
	return s.RunID
}

// benchSeeds makes a csv-sum run and a team run and returns their
// directories.
func benchSeeds(b *testing.B, bin, home string) []string {
	b.Helper()
	for _, args := range [][]string{
		{"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml"},
		{"--mode", "team", "--script", "../../examples/team-csv/script.json", "--inputs", "../../examples/team-csv/inputs", "Sum north and south, then report"},
	} {
		cmd := exec.Command(bin, append([]string{"run", "--home", home, "--provider", "scripted", "--quiet"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("seed run: %v\n%s", err, out)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(home, "runs", "*"))
	slices.Sort(dirs)
	if len(dirs) != 2 {
		b.Fatalf("seed runs: %v", dirs)
	}
	return dirs
}
