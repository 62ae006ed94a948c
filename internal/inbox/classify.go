package inbox

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Class is a message's kind in the R-MSG-4 taxonomy.
type Class string

const (
	ClassRequirementClarification Class = "requirement_clarification"
	ClassFactualCorrection        Class = "factual_correction"
	ClassPriorityChange           Class = "priority_change"
	ClassNewFilesEvidence         Class = "new_files_evidence"
	ClassHypothesisMethodRevision Class = "hypothesis_method_revision"
	ClassSourceToolConstraint     Class = "source_tool_constraint"
	ClassBudgetDeadline           Class = "budget_deadline"
	ClassPauseResumeCancel        Class = "pause_resume_cancel"
	ClassProgressQuery            Class = "progress_query"
	ClassOutputFormatLanguage     Class = "output_format_language"
	ClassUnrelatedSideQuestion    Class = "unrelated_side_question"
)

// Classes lists the taxonomy in the order of SPEC §9.
var Classes = []Class{
	ClassRequirementClarification, ClassFactualCorrection, ClassPriorityChange,
	ClassNewFilesEvidence, ClassHypothesisMethodRevision, ClassSourceToolConstraint,
	ClassBudgetDeadline, ClassPauseResumeCancel, ClassProgressQuery,
	ClassOutputFormatLanguage, ClassUnrelatedSideQuestion,
}

// Valid reports whether c is one of Classes.
func (c Class) Valid() bool {
	for _, k := range Classes {
		if c == k {
			return true
		}
	}
	return false
}

// rule: a class and the patterns (over lower-cased text) that select it.
type rule struct {
	class Class
	re    *regexp.Regexp
}

func words(alts ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[^\pL\pN_])(?:` + strings.Join(alts, "|") + `)(?:$|[^\pL\pN_])`)
}

// rules are tried in order; the first match wins. The order encodes
// precedence: runtime controls before content, specific before general.
// They are compiled on first use, not at every process start (~2.5 ms).
var rules = sync.OnceValue(func() []rule {
	return []rule{
		{ClassPauseResumeCancel, regexp.MustCompile(`^\W*(?:please\s+)?(?:pause|resume|unpause|continue|cancel|abort|halt|stop)\b\W*(?:now|the run|the job|the task|everything|all work|working|please)?\W*$|\b(?:pause|resume|cancel|abort|halt|stop)\s+(?:the\s+)?(?:run|job|whole thing|everything|all work|working)\b|\bkeep going\b`)},
		{ClassBudgetDeadline, words(`budget`, `deadline`, `time limit`, `timeout`, `more time`, `extra time`, `(?:turns|tokens|tool_calls)\s*=`, `\d+\s*(?:more\s+)?(?:turns|tool calls|tokens)`, `extend\w*`, `hurry`, `finish by`, `within \d+\s*(?:m|min|minutes|h|hours?)`, `\d+\s*(?:more|extra)\s*(?:minutes|hours|turns|tokens)`)},
		{ClassProgressQuery, words(`status`, `progress`, `how far`, `how(?:'s| is) it going`, `eta`, `are you done`, `what have you (?:done|found)`, `where are (?:we|you)`, `how long`, `any updates?`, `what(?:'s| is) left`)},
		{ClassRequirementClarification, regexp.MustCompile(`(?:^|\s)/outputs/|\b(?:also|additionally) (?:produce|deliver|write|create|save)\b|\bnew deliverable`)},
		{ClassOutputFormatLanguage, words(`format(?:ted|ting)?`, `(?:as|in|into|to) (?:a |an )?(?:markdown|json|csv|pdf|html|yaml|plain text|latex|table|bullet(?: points| list)?|slides?)`, `language`, `translat\w*`, `(?:in|into|to) (?:english|korean|french|german|spanish|japanese|chinese|italian|portuguese)`, `word count`, `(?:under|at most|max(?:imum)?|no more than|less than) \d+\s*(?:words|pages|lines)`, `\d+\s*words`, `font`, `headings?`, `tone`, `shorter`, `more concise`)},
		{ClassSourceToolConstraint, words(`sources?`, `cite`, `citations?`, `tools?`, `(?:don't|do not|never|only) use`, `without using`, `avoid using`, `wikipedia`, `peer[- ]reviewed`, `no (?:web|internet|network)`, `offline`, `do not (?:search|fetch|browse)`)},
		{ClassNewFilesEvidence, regexp.MustCompile(`/inputs/|https?://|\b(?:attached|attachment|uploaded|i(?:'ve| have)? added|new file|new data|here is|here's|i found|found a|evidence|dataset|see the file)\b`)},
		{ClassFactualCorrection, words(`actually`, `wrong`, `incorrect`, `not true`, `mistake`, `mistaken`, `typo`, `correction`, `isn't`, `is not`, `wasn't`, `was not`, `false`, `in fact`)},
		{ClassHypothesisMethodRevision, words(`hypothes[ie]s`, `approach`, `method`, `methodology`, `premise`, `assumption`, `assume`, `try (?:a different|another|instead)`, `instead of (?:using|computing|assuming)`, `algorithm`, `regression`, `median`, `model it`)},
		{ClassPriorityChange, words(`priorit\w*`, `focus on`, `first`, `more important`, `most important`, `urgent\w*`, `skip`, `later`, `drop`, `cancel (?:the )?(?:item|task|branch|subtask|t\d+)`, `before anything else`)},
		{ClassRequirementClarification, regexp.MustCompile(`/outputs/|\b(?:i mean|i meant|clarify|clarification|to be clear|should (?:include|cover|contain|be)|must|need(?:s|ed)?|require\w*|deliverables?|also (?:include|produce|add|write|deliver)|make sure|objective|the report|the answer|scope)\b`)},
		{ClassUnrelatedSideQuestion, words(`by the way`, `btw`, `unrelated`, `off[- ]topic`, `side question`, `random question`, `weather`, `joke`)},
	}
})

// Classify maps a message to its class with deterministic keyword rules.
// A question matching no rule is an unrelated side question; any other
// unmatched text is treated as a requirement clarification, the class the
// lead reads most carefully.
func Classify(text string) Class {
	t := strings.ToLower(strings.TrimSpace(text))
	if _, ok := ParseBudget(t); ok {
		return ClassBudgetDeadline
	}
	for _, r := range rules() {
		if r.re.MatchString(t) {
			return r.class
		}
	}
	if strings.HasSuffix(t, "?") {
		return ClassUnrelatedSideQuestion
	}
	return ClassRequirementClarification
}

var (
	outputsPath = regexp.MustCompile(`/outputs/[^\s'"]+`)
	contractCue = sync.OnceValue(func() *regexp.Regexp {
		return words(`also (?:produce|deliver|write|create|include|add)`, `instead of`, `new deliverable`, `deliverables?`, `objective`, `acceptance`, `must (?:pass|contain|include|have|be)`, `should (?:also )?(?:contain|include|cover|have)`, `change (?:the )?(?:goal|task|question|objective)`, `rather than`, `the answer should`)
	})
)

// ChangesContract says whether a message of class c likely changes the
// objective, a deliverable or an acceptance clause (R-CONTRACT-3): then the
// run records a new contract instead of treating it as an intervention.
// A format or language change alters what is delivered; a clarification
// that names an /outputs path or a deliverable or acceptance cue changes
// the contract. Everything else stays inside the contract.
// SenderContinue is the sender of a follow-up that continues a finished
// run (apodex continue): it always revises the contract.
const SenderContinue = "continue"

func ChangesContract(c Class, text string) bool {
	t := strings.ToLower(text)
	switch c {
	case ClassOutputFormatLanguage:
		return true
	case ClassRequirementClarification:
		return outputsPath.MatchString(t) || contractCue().MatchString(t)
	case ClassSourceToolConstraint, ClassHypothesisMethodRevision, ClassPriorityChange:
		return outputsPath.MatchString(t)
	}
	return false
}

// Budget keys of ParseBudget and of a budget control's args.
var budgetKeys = map[string]string{
	"turns": "turns", "tool_calls": "tool_calls", "toolcalls": "tool_calls", "calls": "tool_calls",
	"tokens": "tokens", "tokens_in": "tokens_in", "tokens_out": "tokens_out",
	"deadline": "deadline", "soft_deadline": "deadline", "timeout": "timeout", "hard_timeout": "timeout",
	"concurrency": "concurrency", "parallel": "concurrency",
}

var (
	budgetPair = regexp.MustCompile(`\b([a-z_]+)\s*=\s*([+-]?[0-9][0-9a-z.]*)`)
	extendBy   = regexp.MustCompile(`\b(extend|increase|add|give|raise|reduce|cut|shorten|decrease|lower)\b[^.;]*?\b(?:by\s+)?([0-9]+(?:\.[0-9]+)?)\s*(more\s+|extra\s+|additional\s+)?(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|turns?|tool calls?|calls?|tokens?)\b`)
	setTo      = regexp.MustCompile(`\b(deadline|timeout|time limit|turns|tokens|tool calls)\b\s+(?:to|is|of|at|in)\s+([0-9]+(?:\.[0-9]+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|turns?|tokens?|tool calls?)?\b`)
)

// ParseBudget reads budget and deadline changes from a message: key=value
// pairs ("budget turns=60 tokens=200000 deadline=+10m") with the keys turns,
// tool_calls, tokens, tokens_in, tokens_out, deadline, timeout, concurrency,
// or phrases such as "extend the deadline by 10m", "give it 20 more turns",
// "set the timeout to 2h". A value with a leading + or - is relative to the
// current budget. Durations parse with time.ParseDuration: pairs keep the
// text as written ("+10m"), phrases are normalized ("+10m0s").
func ParseBudget(text string) (map[string]string, bool) {
	t := strings.ToLower(text)
	out := map[string]string{}
	for _, m := range budgetPair.FindAllStringSubmatch(t, -1) {
		if k, ok := budgetKeys[m[1]]; ok {
			out[k] = m[2]
		}
	}
	for _, m := range extendBy.FindAllStringSubmatch(t, -1) {
		key, val, ok := budgetValue(m[4], m[2])
		if !ok {
			continue
		}
		sign := "+"
		switch m[1] {
		case "reduce", "cut", "shorten", "decrease", "lower":
			sign = "-"
		}
		if _, dup := out[key]; !dup {
			out[key] = sign + val
		}
	}
	for _, m := range setTo.FindAllStringSubmatch(t, -1) {
		subject := m[1]
		unit := m[3]
		if unit == "" {
			unit = subject
		}
		key, val, ok := budgetValue(unit, m[2])
		if !ok {
			continue
		}
		if subject == "timeout" && key == "deadline" {
			key = "timeout"
		}
		if _, dup := out[key]; !dup {
			out[key] = val
		}
	}
	return out, len(out) > 0
}

func unitDuration(u string) (time.Duration, bool) {
	switch {
	case u == "s" || strings.HasPrefix(u, "sec"):
		return time.Second, true
	case u == "m" || strings.HasPrefix(u, "min"):
		return time.Minute, true
	case u == "h" || strings.HasPrefix(u, "h"):
		return time.Hour, true
	}
	return 0, false
}

// budgetValue turns a number and unit into a budget key and value.
func budgetValue(unit, num string) (key, val string, ok bool) {
	if d, isTime := unitDuration(unit); isTime {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f <= 0 {
			return "", "", false
		}
		return "deadline", time.Duration(f * float64(d)).String(), true
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return "", "", false
	}
	switch {
	case strings.HasPrefix(unit, "turn"):
		return "turns", num, true
	case strings.HasPrefix(unit, "token"):
		return "tokens", num, true
	case strings.HasPrefix(unit, "tool call"), strings.HasPrefix(unit, "call"):
		return "tool_calls", num, true
	}
	return "", "", false
}

var controlVerb = regexp.MustCompile(`\b(pause|unpause|resume|continue|keep going|cancel|abort|halt|stop)\b`)

// AsControl turns a message that Classify puts in pause_resume_cancel or
// budget_deadline into the control command it asks for, so the run can act
// on it directly whatever the model does (R-MSG-4). ok is false when the
// message is neither or gives no usable setting.
func AsControl(text string) (kind string, args map[string]string, ok bool) {
	switch Classify(text) {
	case ClassBudgetDeadline:
		args, ok = ParseBudget(text)
		return ControlBudget, args, ok
	case ClassPauseResumeCancel:
		switch controlVerb.FindString(strings.ToLower(text)) {
		case "pause", "halt", "stop": // ambiguous stops pause: nothing is lost
			return ControlPause, nil, true
		case "unpause", "resume", "continue", "keep going":
			return ControlResume, nil, true
		case "cancel", "abort":
			return ControlCancel, nil, true
		}
	}
	return "", nil, false
}
