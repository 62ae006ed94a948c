package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/run"
)

type flagDef = flag.Flag

// flagSet is a command's flags: --help goes to stdout; a bad flag is one
// usage error (one line on stderr, exit 2).
type flagSet struct {
	*flag.FlagSet
	stdout, stderr io.Writer
	help           func() // prints the help on stdout
}

func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("apodex "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag package calls it on every error too; help is printed by parse
	fs.help = func() {
		fmt.Fprintf(stdout, "Usage: apodex %s %s\n\nFlags:\n", name, synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses flags that may come before or after positional arguments
// ("apodex run OBJECTIVE --json"). A lone "--" ends flags. --help returns
// flag.ErrHelp (exit 0); a bad flag a usage error.
func (fs *flagSet) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help()
				return nil, err
			}
			return nil, usagef("%v; see `%s --help`", err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// given reports the flags set on the command line.
func (fs *flagSet) given() map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flagDef) { set[fl.Name] = true })
	return set
}

// homeFlag registers --home (the home flag group).
func (fs *flagSet) homeFlag() *string {
	return fs.String("home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
}

// jsonFlag registers --json (the output group for reading commands).
func (fs *flagSet) jsonFlag(what string) *bool {
	return fs.Bool("json", false, "print "+what)
}

// oneRun parses args for a command that takes one run id and finds the run.
func (fs *flagSet) oneRun(args []string, home *string) (string, error) {
	pos, err := fs.parse(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("give one run id (see `apodex runs`; `latest` is the newest)")
	}
	return findRun(*home, pos[0])
}

// findRun is the directory of run id under home: a full id, a unique
// prefix, or "latest" (the newest run). An unknown id is a usage error.
func findRun(home, id string) (string, error) {
	h := homeDir(home)
	if id == "latest" {
		infos, err := os.ReadDir(filepath.Join(h, "runs"))
		if err == nil {
			for i := len(infos) - 1; i >= 0; i-- { // ids sort by start time
				if d, err := run.Dir(h, infos[i].Name()); err == nil {
					return d, nil
				}
			}
		}
		return "", fmt.Errorf("%w: there are no runs under %s yet (start one with `apodex run`)", run.ErrNotFound, filepath.Join(h, "runs"))
	}
	return run.Dir(h, id)
}

// homeDir is --home, else $APODEX_HOME, else ~/.apodex, made absolute (the
// sandbox binds run directories by absolute path).
func homeDir(flagValue string) string {
	h := flagValue
	if h == "" {
		h = os.Getenv("APODEX_HOME")
	}
	if h == "" {
		if u, err := os.UserHomeDir(); err == nil {
			h = filepath.Join(u, ".apodex")
		} else {
			h = ".apodex"
		}
	}
	if abs, err := filepath.Abs(h); err == nil {
		return abs
	}
	return h
}

// durationValue is a duration flag (a time.Duration or a recorded
// setting's record.Duration) whose bad value names the expected form.
type durationValue[D ~int64] struct{ p *D }

func durationFlag[D ~int64](fs *flagSet, p *D, name string, value D, usage string) {
	*p = value
	fs.Var(durationValue[D]{p}, name, usage)
}

func (d durationValue[D]) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d.p = D(v)
	return nil
}

func (d durationValue[D]) String() string {
	if d.p == nil {
		return time.Duration(0).String()
	}
	return time.Duration(*d.p).String()
}

// parseDuration reads "5m", "90s", "1h30m"; a bare 0 is zero.
func parseDuration(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("use a duration like 5m, 90s or 1h30m")
	}
	return v, nil
}

// sizeValue is a byte-size flag: 256MiB, 1GiB, 512k, 1048576.
type sizeValue int64

func sizeFlag(fs *flagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var((*sizeValue)(p), name, usage)
}

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) String() string { return formatSize(int64(*v)) }

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"tb", 1000 * 1000 * 1000 * 1000},
	{"bytes", 1}, {"byte", 1},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

// sizeNumber is the number part of a size: digits, maybe a fraction.
var sizeNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// errSize names the form a size takes.
var errSize = errors.New("use a size with a unit, like 256MiB, 1GiB or 512k (a number of bytes says so: 4096B or \"4096 bytes\")")

// parseSize reads a byte count with its unit (binary: KiB, MiB, GiB, and
// k, m, g as their short forms; decimal: kB, MB, GB; B or bytes). A bare
// number is refused (--scratch-quota 5 meant 5 bytes without a word), but
// for 0, which is the same in every unit.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "0" {
		return 0, nil
	}
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		num = strings.TrimSpace(num)
		if !sizeNumber.MatchString(num) {
			break
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f*float64(u.mult) >= math.MaxInt64 {
			break
		}
		return int64(f * float64(u.mult)), nil
	}
	return 0, errSize
}

// formatSize prints n in the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	if n == 0 {
		return "0"
	}
	return strconv.FormatInt(n, 10) + "B"
}
