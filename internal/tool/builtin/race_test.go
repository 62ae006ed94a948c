package builtin

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/workspace"
)

// TestWriteFileHashRace is W6 of issue 11: while write_file runs, an agent's
// command swaps the file for a link to a host file and back, in a loop. The
// hash write_file records as the file's previous content must never be the
// host file's (an equality oracle on host files), and the host file is
// never written.
func TestWriteFileHashRace(t *testing.T) {
	env := testEnv(t)
	host := filepath.Join(t.TempDir(), "secret")
	put(t, host, "host secret\n")
	hostHash := workspace.HashBytes([]byte("host secret\n"))
	ws := env.FS.Workspace
	target := filepath.Join(ws, "f.txt")
	rel, err := filepath.Rel(ws, host)
	if err != nil {
		t.Fatal(err)
	}
	links := []string{host, rel} // absolute and relative links out
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the agent's bash
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(ws, ".swap")
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink(links[i/2%2], tmp)
			} else {
				os.WriteFile(tmp, []byte("mine\n"), 0o644)
			}
			os.Rename(tmp, target)
		}
	}()
	// 2,000 rounds, more (up to 20,000) until a write has gone through
	// while racing: on a loaded machine the swapper can win every round.
	const rounds = 2000
	recorded := 0
	for i := 0; i < rounds || (recorded == 0 && i < 10*rounds); i++ {
		r := writeFile(env, writeFileArgs{Path: "f.txt", Content: "new\n"})
		for _, d := range r.Deltas {
			recorded++
			if d.Before == hostHash {
				close(stop)
				wg.Wait()
				t.Fatalf("round %d: write_file recorded the host file's hash as the previous content", i)
			}
		}
	}
	close(stop)
	wg.Wait()
	if b, _ := os.ReadFile(host); string(b) != "host secret\n" {
		t.Fatalf("host file written: %q", b)
	}
	if recorded == 0 {
		t.Fatal("no write went through: the test proves nothing")
	}
	t.Logf("%d of %d writes recorded a delta", recorded, rounds)
}

// TestWriteFileHashSwapWindow lands the swap of TestWriteFileHashRace
// exactly in the window: the /outputs hook, which runs after ResolveWrite
// looked at the file and again before WriteFile looks, plays the agent's
// command, making the file a link to a host file while write_file hashes
// it and a regular file again before it writes.
func TestWriteFileHashSwapWindow(t *testing.T) {
	env := testEnv(t)
	host := filepath.Join(t.TempDir(), "secret")
	put(t, host, "host secret\n")
	out := env.FS.Outputs
	target := filepath.Join(out, "r.txt")
	put(t, target, "mine\n")
	for _, link := range []string{host, "../../" + filepath.Base(filepath.Dir(host)) + "/secret"} {
		calls := 0
		env.FS.OutputsWrite = func(string, int64) error {
			calls++
			tmp := filepath.Join(out, ".swap")
			if calls%2 == 1 {
				os.Symlink(link, tmp) // after ResolveWrite's check
			} else {
				os.WriteFile(tmp, []byte("mine\n"), 0o644) // before WriteFile's
			}
			return os.Rename(tmp, target)
		}
		r := writeFile(env, writeFileArgs{Path: "/outputs/r.txt", Content: "new\n"})
		for _, d := range r.Deltas {
			if d.Before == workspace.HashBytes([]byte("host secret\n")) {
				t.Fatalf("link %s: write_file recorded the host file's hash", link)
			}
		}
		if calls != 2 && !r.IsError {
			t.Fatalf("the hook ran %d times", calls)
		}
	}
	if b, _ := os.ReadFile(host); string(b) != "host secret\n" {
		t.Fatalf("host file written: %q", b)
	}
}
