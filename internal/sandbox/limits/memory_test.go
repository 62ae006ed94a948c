package limits

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TreeMemory counts every process below root, a grandchild too, and a
// page shared by several processes once: two children of 64 MiB each,
// started by a shell, sum to at least 128 MiB; a shell's own tree without
// them stays far below.
func TestTreeMemory(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	// (a background job's stdin is /dev/null: the children sleep until killed)
	alloc := `import time; b = bytearray(64 << 20); b[::4096] = b"x" * len(b[::4096]); print("ready", flush=True); time.sleep(60)`
	cmd := exec.Command("sh", "-c", `python3 -c "$1" & python3 -c "$1"; wait`, "sh", alloc)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	r := bufio.NewReader(out)
	for range 2 {
		if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("%q %v", line, err)
		}
	}
	if got := TreeMemory(cmd.Process.Pid); got < 128<<20 || got > 512<<20 {
		t.Errorf("two processes of 64 MiB below the shell: %d MiB", got>>20)
	}
	if got := TreeMemory(os.Getpid()); got < 128<<20 {
		t.Errorf("this test's tree holds the shell's: %d MiB", got>>20)
	}
	if got := TreeMemory(1 << 30); got != 0 {
		t.Errorf("no such process: %d", got)
	}
	// A kernel without /proc/PID/task/TID/children: the parents are read
	// from every process's stat instead, with the same answer.
	byChildren := map[int]bool{}
	for _, p := range children(cmd.Process.Pid) {
		byChildren[p] = true
	}
	byScan := scanParents()(cmd.Process.Pid)
	if len(byScan) != 2 || len(byChildren) != 2 || !byChildren[byScan[0]] || !byChildren[byScan[1]] {
		t.Errorf("the shell's children: %v from the children files, %v from stat", byChildren, byScan)
	}
}
