package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/sandbox"
)

// BenchmarkSteps30 is the peer benchmark of issue #12 through the real CLI
// path: the built apodex binary, run as a subprocess against a fake
// OpenAI-compatible endpoint on loopback (streaming), makes 30 `bash` calls
// of `echo`, one per model turn, then calls finish. It reports, per run, the
// wall time from exec to exit and the user+sys CPU and peak RSS of the apodex
// process as wait4 reports them: CPU includes the descendants it reaped (the
// sandbox and the shells, as /usr/bin/time counts them for the peers); peak
// RSS is the largest of those processes, in practice apodex itself. Where
// it can (root, a cgroup v2 hierarchy), each run is started in a cgroup of
// its own and CPU is that cgroup's usage once it is empty: every process's,
// also those apodex never reaps (bubblewrap exits before reaping the live
// sandbox's server, whose CPU wait4 then loses). The
// figures are medians over b.N runs (peak RSS: the maximum); -benchtime 5x
// gives the medians of 5 the peer comparison uses.
//
//	go test -run '^$' -bench '^BenchmarkSteps30$' -benchtime 5x -count 1 ./cmd/apodex/
//
// With APODEX_PROFILE_DIR set, the binary is built with -tags apodexprof and
// each run writes a CPU profile of the apodex process there (cpuprofile.go):
//
//	APODEX_PROFILE_DIR=/tmp/prof go test -run '^$' -bench '^BenchmarkSteps30$/none' -benchtime 5x ./cmd/apodex/
//	go tool pprof -top /tmp/prof/none-*.pprof
func BenchmarkSteps30(b *testing.B) {
	bin := buildApodex(b)
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative, sandbox.KindNone} {
		b.Run(kind, func(b *testing.B) {
			if kind != sandbox.KindNone {
				if _, err := sandbox.New(kind); err != nil {
					b.Skipf("no %s sandbox here: %v", kind, err)
				}
			}
			srv := llmtest.NewOpenAI(b, steps30Policy(30))
			home := b.TempDir()
			var walls, cpus []time.Duration
			var rss []int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				wall, cpu, maxrss := runApodex(b, bin, home, srv.URL, kind, i)
				walls, cpus, rss = append(walls, wall), append(cpus, cpu), append(rss, maxrss)
			}
			b.StopTimer()
			checkSteps30(b, srv.Requests(), 30)
			b.ReportMetric(median(walls).Seconds(), "wall-s/run")
			b.ReportMetric(median(cpus).Seconds(), "cpu-s/run")
			b.ReportMetric(float64(slices.Max(rss))/1024, "peak-RSS-MB")
			b.ReportMetric(0, "ns/op") // wall-s/run is the median; ns/op would be the mean
		})
	}
}

// steps30Policy answers a request by how many tool results it carries, so
// every run of the binary plays the same script on one server: `echo step k`
// while fewer than steps results came back, then finish.
func steps30Policy(steps int) func(int, llmtest.Request) llmtest.Turn {
	return func(_ int, req llmtest.Request) llmtest.Turn {
		done := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		if done < steps {
			return calls(bash(fmt.Sprintf("echo step %d", done+1)))
		}
		return calls(finish(fmt.Sprintf("ran %d echo commands", done)))
	}
}

// checkSteps30 checks that every request that got finish carried the
// outputs of all steps, in order: the commands really ran.
func checkSteps30(b *testing.B, reqs []llmtest.Request, steps int) {
	b.Helper()
	finished := 0
	for _, req := range reqs {
		var outs []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				outs = append(outs, m.Content)
			}
		}
		if len(outs) < steps {
			continue
		}
		finished++
		for k, o := range outs {
			if !strings.Contains(o, fmt.Sprintf("step %d\n", k+1)) {
				b.Fatalf("tool result %d does not show the echo's output:\n%s", k+1, o)
			}
		}
	}
	if finished != b.N {
		b.Fatalf("%d runs reached finish, want %d", finished, b.N)
	}
}

// runApodex runs one 30-step run and checks that it completed with every
// step executed; it returns the wall time and the apodex process's CPU time
// and peak RSS (KiB).
func runApodex(b *testing.B, bin, home, url, kind string, i int) (time.Duration, time.Duration, int64) {
	b.Helper()
	cmd := exec.Command(bin, "run", "--home", home, "--provider", "openai", "--base-url", url, "--model", "m",
		"--sandbox", kind, "--quiet", "--json", "--max-turns", "40", "Run 30 echo commands, one per turn, then finish.")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=fake")
	if dir := os.Getenv("APODEX_PROFILE_DIR"); dir != "" {
		cmd.Env = append(cmd.Env, "APODEX_CPUPROFILE="+filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, i)))
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cg := newCPUGroup(b, kind, i)
	if cg != nil {
		defer func() {
			if cg != nil {
				cg.remove()
			}
		}()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.fd}
	}
	start := time.Now()
	err := cmd.Start()
	if err != nil && cg != nil { // a kernel without clone3 into a cgroup (before 5.7)
		b.Logf("start in a cgroup: %v; CPU is what wait4 reports", err)
		cg.remove()
		cg, cmd.SysProcAttr = nil, nil
		start = time.Now()
		err = cmd.Start()
	}
	if err == nil {
		err = cmd.Wait()
	}
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("apodex run --sandbox %s: %v\n%s", kind, err, errb.String())
	}
	var sum struct {
		Status    string `json:"status"`
		ToolCalls int    `json:"tool_calls"`
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Status != "completed" {
		b.Fatalf("apodex run --sandbox %s: status %q (%v)\n%s", kind, sum.Status, err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if cg != nil {
		cpu = cg.usage(b)
	}
	return wall, cpu, ru.Maxrss
}

// cpuGroup is a cgroup v2 one run starts in, for its CPU usage.
type cpuGroup struct {
	dir string
	fd  int
}

var cpuGroupOnce sync.Once

// newCPUGroup makes a cgroup for run i, nil (with one log line) where it
// cannot: CPU is then what wait4 reports.
func newCPUGroup(b *testing.B, kind string, i int) *cpuGroup {
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
			continue // not v2
		}
		dir := filepath.Join(root, fmt.Sprintf("apodex-steps30-%d-%s-%d", os.Getpid(), kind, i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			break
		}
		fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			_ = os.Remove(dir)
			break
		}
		return &cpuGroup{dir: dir, fd: fd}
	}
	cpuGroupOnce.Do(func() { b.Log("no cgroup v2 to start runs in: CPU is what wait4 reports (reaped processes only)") })
	return nil
}

// usage waits until every process of the run has left the cgroup and
// returns their CPU time.
func (g *cpuGroup) usage(b *testing.B) time.Duration {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		procs, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
		if err != nil {
			b.Fatal(err)
		}
		if len(bytes.TrimSpace(procs)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("processes of the run still alive 10 s after apodex exited: %s", procs)
		}
	}
	stat, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return time.Duration(us) * time.Microsecond
		}
	}
	b.Fatalf("no usage_usec in %s", stat)
	return 0
}

func (g *cpuGroup) remove() {
	syscall.Close(g.fd)
	_ = os.Remove(g.dir)
}

// buildApodex builds the binary once into a temporary directory.
func buildApodex(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "apodex")
	args := []string{"build", "-o", bin}
	if os.Getenv("APODEX_PROFILE_DIR") != "" {
		args = append(args, "-tags", "apodexprof")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	return bin
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
