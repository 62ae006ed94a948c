package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/worktree"
)

// errLive: a run a process is running is never removed.
var errLive = errors.New("is live")

// cmdRm removes runs: their whole directories (record, inputs, workspace,
// outputs). A live run is refused.
func cmdRm(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("rm", "[flags] RUN...   (removes each run's directory: record, inputs, workspace and outputs)", stdout, stderr)
	home := fs.HomeFlag()
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.Usagef("give the runs to remove (see `apodex runs`)")
	}
	var dirs []string
	for _, id := range pos { // every id is found before anything is removed
		dir, err := cmdline.FindRun(*home, id)
		if err != nil {
			return err
		}
		dirs = append(dirs, dir)
	}
	var failed error
	for _, dir := range dirs {
		if err := removeRun(dir); err != nil {
			fmt.Fprintf(stderr, "apodex rm: %v\n", err)
			failed = cmdline.ExitError(cmdline.ExitFailed)
			continue
		}
		fmt.Fprintf(stdout, "removed %s\n", filepath.Base(dir))
	}
	return failed
}

// cmdPrune removes the runs older than an age, but live ones (and with
// --keep-failed those that did not complete).
func cmdPrune(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("prune", "--older-than AGE [flags]   (e.g. apodex prune --older-than 30d --keep-failed)", stdout, stderr)
	home := fs.HomeFlag()
	var f runFilter
	f.register(fs, false)
	var olderThan time.Duration
	fs.Func("older-than", "remove the runs started longer ago than this: 30d, 2w, 12h (required)", func(s string) error {
		d, err := parseAge(s)
		olderThan = d
		return err
	})
	fs.Meta("older-than", "AGE")
	keepFailed := fs.Bool("keep-failed", false, "keep the runs that did not complete (failed, stopped, awaiting review)")
	dryRun := fs.Bool("dry-run", false, "print what would be removed, and remove nothing")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	given := fs.Given()
	switch {
	case len(pos) > 0:
		return cmdline.Usagef("unexpected argument %q; to remove given runs use `apodex rm RUN…`", pos[0])
	case !given["older-than"]:
		return cmdline.Usagef("give --older-than AGE (e.g. 30d): prune removes only runs older than that")
	}
	h := cmdline.HomeDir(*home)
	if err := f.check(h); err != nil {
		return err
	}
	f.before = time.Now().Add(-olderThan)
	infos, err := listRuns(h)
	if err != nil {
		return err
	}
	rollouts := eval.RolloutRuns(h)
	removed, kept := 0, 0
	var failed error
	for _, i := range infos {
		if i.Started.IsZero() { // unreadable: by the directory's age
			if st, err := os.Stat(i.RunDir); err == nil {
				i.Started = st.ModTime()
			}
		}
		if !f.keep(i, rollouts) {
			continue
		}
		switch {
		case i.Status == run.StatusRunning:
			fmt.Fprintf(stdout, "kept %s: it is live\n", i.RunID)
			kept++
			continue
		case *keepFailed && i.Status != run.StatusCompleted:
			kept++
			continue
		case *dryRun:
			fmt.Fprintf(stdout, "would remove %s (%s, started %s)\n", i.RunID, i.Status, i.Started.Local().Format("2006-01-02 15:04"))
			removed++
			continue
		}
		if err := removeRun(i.RunDir); err != nil {
			if errors.Is(err, errLive) {
				fmt.Fprintf(stdout, "kept %s: it is live\n", i.RunID)
				kept++
				continue
			}
			fmt.Fprintf(stderr, "apodex prune: %v\n", err)
			failed = cmdline.ExitError(cmdline.ExitFailed)
			continue
		}
		fmt.Fprintf(stdout, "removed %s (%s, started %s)\n", i.RunID, i.Status, i.Started.Local().Format("2006-01-02 15:04"))
		removed++
	}
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(stdout, "%s %d runs older than %s; kept %d\n", verb, removed, formatAge(olderThan), kept)
	return failed
}

// removeRun removes the run in dir, holding its live lock meanwhile so
// that no resume starts on it: a live run is refused (errLive), and so is
// a directory that still has something mounted under it.
func removeRun(dir string) error {
	id := filepath.Base(dir)
	lock, err := os.OpenFile(filepath.Join(dir, runview.LockFile), os.O_RDWR, 0)
	switch {
	case err == nil:
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return fmt.Errorf("run %s %w: a process is running it; cancel it first (apodex cancel %s) or wait for its end", id, errLive, id)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("run %s: %w", id, err)
	}
	// A team's worktrees and a world rollout's overlay may still be mounted
	// if their process was killed.
	worktree.Cleanup(filepath.Join(dir, "worktrees"))
	worktree.Cleanup(filepath.Join(dir, "world"))
	if m := mountUnder(dir); m != "" {
		return fmt.Errorf("run %s: %s is still mounted; unmount it (umount %s) and try again", id, m, m)
	}
	// Read-only directories (the inputs' copy) would stop the removal.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	return nil
}

// mountUnder is a mount point under dir, or "".
func mountUnder(dir string) string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			return fields[1]
		}
	}
	return ""
}

// formatAge prints an age as prune's flag takes it: 30d, 2w, 12h.
func formatAge(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d >= day && d%(7*day) == 0:
		return fmt.Sprintf("%dw", d/(7*day))
	case d >= day && d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	}
	return cmdline.FormatDuration(d)
}
