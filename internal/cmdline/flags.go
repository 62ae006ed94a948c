package cmdline

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

	"github.com/apodex/apodex/internal/runview"
)

type flagDef = flag.Flag

// FlagSet is a command's flags: --help goes to stdout; a bad flag is one
// usage error (one line on stderr, exit 2).
type FlagSet struct {
	*flag.FlagSet
	stdout, stderr io.Writer
	help           func() // prints the help on stdout
	// metas are placeholders set by choices and meta: what the help shows
	// after the flag's name, and what completion offers for its value.
	metas map[string]string
}

func NewFlagSet(name, synopsis string, stdout, stderr io.Writer) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet("apodex "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr, metas: map[string]string{}}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag package calls it on every error too; help is printed by parse
	fs.help = func() {
		fmt.Fprintf(stdout, "Usage: apodex %s %s\n", name, synopsis)
		if n := countFlags(fs.FlagSet); n > 0 {
			fmt.Fprint(stdout, "\nFlags:\n")
			fs.printFlags(stdout)
		}
	}
	return fs
}

// Choices names the values flag name takes (its help shows a|b|c, and
// completion offers them).
func (fs *FlagSet) Choices(name string, values ...string) {
	fs.metas[name] = strings.Join(values, "|")
}

// Meta sets the placeholder of flag name's value (DIR, FILE, RUN, …).
func (fs *FlagSet) Meta(name, placeholder string) { fs.metas[name] = placeholder }

// NamePlaceholders are the placeholders of flags by name, where the type
// alone says too little (a string): completion reads them too (DIR and
// FILE complete paths, RUN run ids, WORLD world ids, EVAL eval ids).
var NamePlaceholders = map[string]string{
	"home": "DIR", "inputs": "DIR", "corpus": "DIR", "out": "PATH",
	"task": "FILE", "script": "FILE", "gold": "FILE", "report": "FILE", "plot": "FILE",
	"base-url": "URL", "addr": "HOST:PORT", "token": "TOKEN",
	"model": "NAME", "profile": "NAME", "judge-model": "NAME", "mapper-model": "NAME", "reviewer-model": "NAME", "arbiter-model": "NAME",
	"world": "WORLD", "follow": "EVAL", "eval": "EVAL", "agent": "AGENT", "update": "ID", "withdraw": "ID",
	"note": "TEXT", "budget": "KEY=VALUE", "drop": "LIST", "min-grade": "N",
	"log-level": "debug|info|warn|error", "provider": "openai|anthropic|scripted",
}

// Placeholder is what the help shows after --name: nothing for a switch,
// else the value's form.
func (fs *FlagSet) Placeholder(f *flag.Flag) string {
	if p, ok := fs.metas[f.Name]; ok {
		return p
	}
	if p, ok := f.Value.(interface{ Placeholder() string }); ok {
		return p.Placeholder()
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	if p, ok := NamePlaceholders[f.Name]; ok {
		return p
	}
	switch fmt.Sprintf("%T", f.Value) {
	case "*flag.intValue", "*flag.int64Value", "*flag.uintValue", "*flag.uint64Value":
		return "N"
	case "*flag.float64Value":
		return "NUMBER"
	}
	return "VALUE"
}

// printFlags prints every flag as "--name PLACEHOLDER", its usage below
// it and a default that is not the zero value. The usage is printed as
// written (the flag package's would take a `quoted` phrase as the
// placeholder: "-world apodex worlds list").
func (fs *FlagSet) printFlags(w io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		head := "  --" + f.Name
		if p := fs.Placeholder(f); p != "" {
			head += " " + p
		}
		fmt.Fprintln(w, head)
		usage := f.Usage
		switch f.DefValue {
		case "", "0", "false", "0s", "[]":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		for _, l := range strings.Split(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", l)
		}
	})
}

func countFlags(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

// Parse parses flags that may come before or after positional arguments
// ("apodex run OBJECTIVE --json"). A lone "--" ends flags. --help returns
// flag.ErrHelp (exit 0); a bad flag a usage error. It stands in for the
// embedded flag.FlagSet.Parse, which stops at the first argument.
func (fs *FlagSet) Parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help()
				return nil, err
			}
			return nil, Usagef("%v; see `%s --help`", err, fs.Name())
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

// Given reports the flags set on the command line.
func (fs *FlagSet) Given() map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flagDef) { set[fl.Name] = true })
	return set
}

// HomeFlag registers --home (the home flag group).
func (fs *FlagSet) HomeFlag() *string {
	return fs.String("home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
}

// JSONFlag registers --json (the output group for reading commands).
func (fs *FlagSet) JSONFlag(what string) *bool {
	return fs.Bool("json", false, "print "+what)
}

// OneRun parses args for a command that takes one run id and finds the run.
func (fs *FlagSet) OneRun(args []string, home *string) (string, error) {
	pos, err := fs.Parse(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", Usagef("give one run id (see `apodex runs`; `latest` is the newest)")
	}
	return FindRun(*home, pos[0])
}

// FindRun is the directory of run id under home: a full id, a unique
// prefix, or "latest" (the newest run). An unknown id is a usage error.
func FindRun(home, id string) (string, error) {
	h := HomeDir(home)
	if id == "latest" {
		infos, err := os.ReadDir(filepath.Join(h, "runs"))
		if err == nil {
			for i := len(infos) - 1; i >= 0; i-- { // ids sort by start time
				if d, err := runview.Dir(h, infos[i].Name()); err == nil {
					return d, nil
				}
			}
		}
		return "", fmt.Errorf("%w: there are no runs under %s yet (start one with `apodex run`)", runview.ErrNotFound, filepath.Join(h, "runs"))
	}
	return runview.Dir(h, id)
}

// HomeDir is --home, else $APODEX_HOME, else ~/.apodex, made absolute (the
// sandbox binds run directories by absolute path).
func HomeDir(flagValue string) string {
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

func DurationFlag[D ~int64](fs *FlagSet, p *D, name string, value D, usage string) {
	*p = value
	fs.Var(durationValue[D]{p}, name, usage)
}

func (d durationValue[D]) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d.p = D(v)
	return nil
}

func (d durationValue[D]) String() string {
	if d.p == nil {
		return "0s"
	}
	return FormatDuration(time.Duration(*d.p))
}

func (durationValue[D]) Placeholder() string { return "DURATION" }

// FormatDuration is d as people write it: 2m, 1h30m, 90s (not 2m0s).
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseDuration reads "5m", "90s", "1h30m"; a bare 0 is zero.
func ParseDuration(s string) (time.Duration, error) {
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

func SizeFlag(fs *FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var((*sizeValue)(p), name, usage)
}

func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) String() string { return FormatSize(int64(*v)) }

func (*sizeValue) Placeholder() string { return "SIZE" }

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

// ParseSize reads a byte count with its unit (binary: KiB, MiB, GiB, and
// k, m, g as their short forms; decimal: kB, MB, GB; B or bytes). A bare
// number is refused (--scratch-quota 5 meant 5 bytes without a word), but
// for 0, which is the same in every unit.
func ParseSize(s string) (int64, error) {
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

// FormatSize prints n in the largest binary unit that divides it.
func FormatSize(n int64) string {
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
