package publish

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apodex/apodex/internal/hostfs"
)

// The holder's copy of /outputs for a command is made while a file tool
// writes in /outputs (a temporary file renamed into place, as hostfs does):
// an entry gone by the time it is copied was simply not there, and making
// the copy never fails for it. It did, and the command never ran: "copy
// /outputs for the command: ... no such file or directory".
func TestStageWhileWriting(t *testing.T) {
	f := newFixture(t, 1<<20, map[string]string{"keep.txt": "keep\n"})
	d, err := hostfs.Open(f.outputs)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
				if _, _, err := d.Replace(name, strings.NewReader(strconv.Itoa(i)), 0o644, ""); err != nil {
					t.Errorf("replace: %v", err)
					return
				}
			}
		}
	})
	for range 150 {
		st, err := f.plane.stage(context.Background(), "main", nil)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("staging while a file tool writes: %v", err)
		}
		if b, err := os.ReadFile(st.dir + "/keep.txt"); err != nil || string(b) != "keep\n" {
			t.Errorf("the copy lost keep.txt: %q %v", b, err)
		}
		os.RemoveAll(st.dir)
	}
	stop.Store(true)
	wg.Wait()
}
