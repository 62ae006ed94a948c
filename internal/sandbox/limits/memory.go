package limits

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

// Where no cgroup bounds memory (a runtime that is not root and has no
// delegated cgroup), RLIMIT_AS bounds each process of a command but not
// their sum: four processes of 200 MiB each pass a 256 MiB limit. The
// runner then also measures the sum from outside the sandbox (MemoryWatch)
// and kills the command once it is past the limit. Like a measured quota,
// a burst between two measurements can pass it for that long; the command
// cannot stop the measuring, which runs in the runtime, nor hide from it:
// every process it starts stays below its first process in the host's
// process tree (an orphan is adopted by the command's pid 1), and a
// process whose memory map the runtime may not read (made undumpable) is
// counted by its whole resident size.

// memoryPoll is the pause between two measurements of a command's memory.
const memoryPoll = 100 * time.Millisecond

// TreeMemory is the memory of root and every process below it, in bytes:
// the sum of their proportional set sizes (a page shared by n processes
// counts 1/n for each, as a memory cgroup charges it once), or the
// resident size of a process whose map cannot be read. Processes that end
// while it reads count what was read of them.
func TreeMemory(root int) int64 {
	kids := children
	if !hasChildrenFiles() {
		kids = scanParents()
	}
	var sum int64
	seen := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		sum += processMemory(pid)
		queue = append(queue, kids(pid)...)
	}
	return sum
}

// hasChildrenFiles says the kernel lists a task's children in
// /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
var hasChildrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
	return err == nil
})

// scanParents reads the parent of every process in /proc once, for a
// kernel without the children files; it returns the children of a pid.
func scanParents() func(int) []int {
	byParent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			if f := bytes.Fields(b[i+1:]); len(f) >= 2 {
				if ppid, err := strconv.Atoi(string(f[1])); err == nil {
					byParent[ppid] = append(byParent[ppid], pid)
				}
			}
		}
	}
	return func(pid int) []int { return byParent[pid] }
}

// children are the pids of pid's children, over all its threads.
func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// processMemory is pid's Pss from smaps_rollup, else its resident size
// from statm (readable for any process), else 0 (it has ended).
func processMemory(pid int) int64 {
	p := "/proc/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(p + "/smaps_rollup"); err == nil {
		if i := bytes.Index(b, []byte("\nPss:")); i >= 0 {
			f := bytes.Fields(b[i+len("\nPss:"):])
			if len(f) > 0 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	b, err := os.ReadFile(p + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}

// MemoryWatch measures the memory of the process tree at root every
// memoryPoll until stop closes, and calls over once (then returns) when it
// is past limit.
func MemoryWatch(root int, limit int64, stop <-chan struct{}, over func()) {
	if root <= 0 || limit <= 0 {
		return
	}
	t := time.NewTicker(memoryPoll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if TreeMemory(root) > limit {
				over()
				return
			}
		}
	}
}

// BoundsMemory says the cgroup bounds the memory of what runs in it; else
// only RLIMIT_AS and MemoryWatch do.
func (cg *Cgroup) BoundsMemory() bool { return cg != nil && cg.memory != "" }
