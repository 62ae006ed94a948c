package tool

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Prose problems in a text sent to every model (a tool's description, an
// argument's): what CheckProse looks for.
var (
	// doubledPunct: "not.." , ",," , ". ." , "x ." — a sentence glued
	// from parts where one part's end met another's.
	// A dot that starts a name (".git") is not punctuation.
	doubledPunct = regexp.MustCompile(`[.,;:]\s*[.,;:]([^\w/]|$)|\s[.,;:](\s|$)`)
	// sentenceStart: a full stop, then a word that is not capitalized
	// ("There is no network. in the sandbox").
	sentenceStart = regexp.MustCompile(`[.!?]\s+(\S+)`)
)

// CheckProse says what is wrong with a description a model reads: doubled
// punctuation, a sentence that starts in lower case (a fragment), a text
// that does not start with a capital or end with a full stop, a doubled
// space or unbalanced parentheses or backquotes. Nil when it reads right.
// Tests run it over every tool offered (tool's and the other packages').
func CheckProse(s string) error {
	var bad []string
	// An ellipsis and a path's ".." are not punctuation; same length, so
	// indexes into n are indexes into s.
	n := strings.NewReplacer("...", "___", "../", "__/", "`..`", "`__`").Replace(s)
	if m := doubledPunct.FindStringIndex(n); m != nil {
		bad = append(bad, fmt.Sprintf("doubled punctuation %q", excerpt(s, m[0])))
	}
	for _, m := range sentenceStart.FindAllStringSubmatchIndex(n, -1) {
		word := s[m[2]:m[3]]
		if r, _ := utf8.DecodeRuneInString(word); unicode.IsLower(r) && !codeLike(word) && !abbreviation(s[:m[0]]) {
			bad = append(bad, fmt.Sprintf("a sentence starts in lower case: %q", excerpt(s, m[0])))
		}
	}
	t := strings.TrimSpace(s)
	if r, _ := utf8.DecodeRuneInString(t); t != "" && unicode.IsLower(r) && !codeLike(strings.Fields(t)[0]) {
		bad = append(bad, fmt.Sprintf("starts in lower case: %q", excerpt(s, 0)))
	}
	if t != "" && !strings.HasSuffix(t, ".") && !strings.HasSuffix(t, ".)") && !strings.HasSuffix(t, "?") {
		bad = append(bad, fmt.Sprintf("does not end with a full stop: %q", excerpt(s, max(0, len(t)-40))))
	}
	if t != s {
		bad = append(bad, "leading or trailing white space")
	}
	if i := strings.Index(s, "  "); i >= 0 {
		bad = append(bad, fmt.Sprintf("a doubled space: %q", excerpt(s, i)))
	}
	if strings.Count(s, "`")%2 != 0 {
		bad = append(bad, "an unpaired backquote")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(bad, "; "))
}

// codeLike is a word a sentence may start with in lower case: a path, a
// tool or argument name, a command.
func codeLike(w string) bool {
	w = strings.Trim(w, "`\"'(),:;")
	return strings.ContainsAny(w, "/_=.:-{}[]") || knownLower[w]
}

// knownLower are names that are written in lower case wherever they stand.
var knownLower = map[string]bool{"bash": true, "grep": true, "awk": true, "sed": true, "jq": true, "python3": true, "finish": true, "report": true, "dispatch": true, "wait": true, "verify": true, "search": true, "fetch": true, "recall": true}

// abbreviation reports whether the text before a full stop ends with one
// (e.g., i.e., etc.), after which a lower-case word is right.
func abbreviation(before string) bool {
	for _, a := range []string{"e.g", "i.e", "etc", "vs", "cf"} {
		if strings.HasSuffix(before, a) {
			return true
		}
	}
	return false
}

func excerpt(s string, i int) string {
	from, to := max(0, i-25), min(len(s), i+25)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	return s[from:to]
}
