package divergence

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Normalization rules: what an observation may differ by between a run and
// its replay. Everything else is compared exactly.
//
// What any replay differs by, by construction (no divergence at all):
//
//  1. The run directory: the original's and the replay's (as given and with
//     links resolved) both read <RUN>.
//  2. RFC 3339 timestamps (2026-01-02T15:04:05.999Z, with or without
//     fraction and zone) read <TIME>.
//  3. "took 12ms"-style durations read "took <DUR>".
//  4. Random temporary names: the publication plane's staging directories
//     (outputs-<digits>), the runtime's atomic-write temporaries
//     (.apodex-<suffix>, .apodex-merge-<hex>) and blob temporaries
//     (.tmp-<digits>) read with <TMP> for the random part.
//  5. Tool metadata: duration_ms is dropped (and the tool_result's own
//     duration_ms is not compared); string values follow rules 1-4.
//  6. The lead's notices of its subagents' ends are compared as one ordered
//     stream, whichever wait result or turn-start observation carried them
//     (see notices.go).
//  7. A URL the run fetched is served to the replay from the record (it
//     never reaches the network), which says so and cannot know the
//     page's length: a fetch result of a URL is compared by its evidence
//     (the id, source, lines and hash of what was shown) and error flag.
//
// What a command prints that cannot repeat (a divergence of class
// nondeterministic_output, reported but not counted against identity):
//
//  8. File times: the date and time of a long listing (ls -l, -lt,
//     --full-time, long-iso, numeric owners, with or without -i) read
//     <MTIME>; other clock times (stat's Access/Modify/Change/Birth,
//     "2026-12-02 02:58:29.468 +0000" in any output; date's "Wed Dec  2
//     02:58:29 UTC 2026") read <TIME>. The replay's inputs are fresh copies,
//     and its commands run later.
//  9. Inode numbers: stat's "Inode: N" and the first column of ls -i read
//     <INODE>; device numbers: stat's "Device: N,M" reads <DEV> (each
//     command writes /workspace through an overlay of its own, so the
//     device differs from command to command).
//  10. Byte counts of the output (stdout_bytes, stderr_bytes), which follow
//     from 8 and 9.
//  11. Line order: the same lines in another order (ls -t sorts by those
//     times, find and a directory's order are the file system's).
var (
	rfc3339   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?`)
	tookDur   = regexp.MustCompile(`\btook \d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|m|h)\b`)
	stageName = regexp.MustCompile(`\boutputs-\d+`)
	tempName  = regexp.MustCompile(`\.apodex-(?:merge-)?[0-9A-Za-z]+`)
	blobTemp  = regexp.MustCompile(`\.tmp-\d+`)

	// rule 8 and 9: a long listing's line: [inode] mode links [owner] [group] size date name.
	lsLong = regexp.MustCompile(`(?m)^([ \t]*\d+[ \t]+)?([-bcdlpsD][-rwxsStTl]{9}[.+@]?[ \t]+\d+[ \t]+(?:[^ \t\n]+[ \t]+){0,2}(?:\d+,[ \t]*)?\d+(?:[.,]\d+)?[KMGTPkB]?[ \t]+)` +
		`([A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]+(?:\d{1,2}:\d{2}|\d{4})|\d{4}-\d{2}-\d{2}(?:[ \t]+\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[ \t]+[+-]\d{4})?)?|\d{2}-\d{2}[ \t]+\d{2}:\d{2})([ \t])`)
	clockTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[+-]\d{2}:?\d{2}|\s?UTC|Z)?`)
	dateTime  = regexp.MustCompile(`\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{2}:\d{2}:\d{2} (?:[A-Z]{2,5} )?\d{4}\b`)
	statInode = regexp.MustCompile(`\bInode: \d+ *`) // stat pads it to a width
	statDev   = regexp.MustCompile(`\bDevice: (?:\d+,\d+|[0-9a-f]+h/\d+d)`)

	// rule 7: the evidence line a fetch result ends with, and the page line
	// of a URL before it.
	evidenceLine = regexp.MustCompile(`(?m)^\[evidence E\d+: .*\]$`)
	urlPage      = regexp.MustCompile(`(?m)^\[https?://[^\s\]]*.*: lines \d+-\d+`)
)

// Names of the nondeterministic-output rules, for a divergence's text.
const (
	ruleFileTimes = "file times"
	ruleClock     = "clock times"
	ruleInodes    = "inode numbers"
	ruleDevices   = "device numbers"
	ruleOrder     = "line order"
)

// normalizer applies the rules for one side of the comparison.
type normalizer struct{ dirs []string }

func newNormalizer(dir string) normalizer {
	n := normalizer{dirs: []string{dir}}
	if r, err := filepath.EvalSymlinks(dir); err == nil && r != dir {
		n.dirs = append(n.dirs, r)
	}
	return n
}

// text applies rules 1-4.
func (n normalizer) text(s string) string {
	for _, d := range n.dirs {
		s = strings.ReplaceAll(s, d, "<RUN>")
	}
	s = rfc3339.ReplaceAllString(s, "<TIME>")
	s = tookDur.ReplaceAllString(s, "took <DUR>")
	s = stageName.ReplaceAllString(s, "outputs-<TMP>")
	s = tempName.ReplaceAllString(s, ".apodex-<TMP>")
	return blobTemp.ReplaceAllString(s, ".tmp-<TMP>")
}

// meta is a tool result's metadata without its duration, texts normalized
// (rule 5).
func (n normalizer) meta(m *record.ToolMeta) record.ToolMeta {
	if m == nil {
		return record.ToolMeta{}
	}
	out := *m
	out.DurationMS = 0
	out.SnapshotError = n.text(out.SnapshotError)
	return out
}

// noise applies rules 8 and 9 to a text already normalized by text, and
// says which changed it.
func noise(s string) (string, []string) {
	var used []string
	apply := func(name string, re *regexp.Regexp, f func(string) string) {
		if out := re.ReplaceAllStringFunc(s, f); out != s {
			s = out
			if !slices.Contains(used, name) {
				used = append(used, name)
			}
		}
	}
	inodes := false
	apply(ruleFileTimes, lsLong, func(line string) string {
		m := lsLong.FindStringSubmatch(line)
		inode := m[1]
		if inode != "" { // with the padding that aligns it to the widest
			inode, inodes = "<INODE> ", true
		}
		return inode + m[2] + "<MTIME>" + m[4]
	})
	if inodes {
		used = append(used, ruleInodes)
	}
	apply(ruleClock, clockTime, func(string) string { return "<TIME>" })
	apply(ruleClock, dateTime, func(string) string { return "<TIME>" })
	apply(ruleInodes, statInode, func(string) string { return "Inode: <INODE> " })
	apply(ruleDevices, statDev, func(string) string { return "Device: <DEV>" })
	return s, used
}

// sameLines reports whether a and b hold the same lines in another order
// (rule 11).
func sameLines(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	slices.Sort(la)
	slices.Sort(lb)
	return slices.Equal(la, lb)
}

// noiseEqual reports whether a and b (normalized by text) differ only by
// nondeterministic output, and by which rules.
func noiseEqual(a, b string) (bool, []string) {
	x, ux := noise(a)
	y, uy := noise(b)
	rules := ux
	for _, r := range uy {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	if x == y {
		return true, rules
	}
	if sameLines(x, y) {
		return true, append(rules, ruleOrder)
	}
	return false, nil
}

// fetchedURL reports whether a tool result is a page of a URL (fetched, or
// served from the record), and returns its evidence lines (rule 7).
func fetchedURL(tr record.ToolResult) (evidence string, ok bool) {
	if tr.Name != "fetch" || tr.IsError || !urlPage.MatchString(tr.Output) {
		return "", false
	}
	return strings.Join(evidenceLine.FindAllString(tr.Output, -1), "\n"), true
}
