package verify

import (
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/record"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/contract"
)

// Test statuses, as reports name them.
const (
	statusPassed  = "passed"
	statusFailed  = "failed"
	statusError   = "error"
	statusSkipped = "skipped"
	statusXFail   = "expected failure"
	statusXPass   = "unexpected success"

	statusNotReported = "not reported"
)

// maxReport bounds a JUnit report read from the clause's report directory.
const maxReport = 16 << 20

// testResult is one test a runner reported.
type testResult struct {
	ID     string
	Status string
}

// judgeReport decides a tests clause with must_pass: every listed id must
// match at least one reported test, and every test it matches must have
// passed. A test reported twice with different statuses (a forged
// "PASSED" line next to the runner's own "FAILED") counts as not passed.
func judgeReport(mustPass []string, results []testResult) (bool, string, []TestOutcome) {
	outcomes := make([]TestOutcome, 0, len(mustPass))
	if len(results) == 0 {
		for _, id := range mustPass {
			outcomes = append(outcomes, TestOutcome{ID: id, Status: statusNotReported})
		}
		return false, "the report lists no tests: the tests did not run, or the process under test ended before the runner reported (a deliverable calling os._exit does that)", outcomes
	}
	var missing, failed []string
	for _, id := range mustPass {
		want := normID(id)
		var statuses []string
		for _, r := range results {
			if got := normID(r.ID); got == want || strings.HasSuffix(got, "."+want) {
				if !slices.Contains(statuses, r.Status) {
					statuses = append(statuses, r.Status)
				}
			}
		}
		switch {
		case len(statuses) == 0:
			missing = append(missing, id)
			statuses = []string{statusNotReported}
		case len(statuses) > 1 || statuses[0] != statusPassed:
			failed = append(failed, fmt.Sprintf("%s (%s)", id, strings.Join(statuses, ", ")))
		}
		outcomes = append(outcomes, TestOutcome{ID: id, Status: strings.Join(statuses, ", ")})
	}
	var why []string
	if len(failed) > 0 {
		why = append(why, fmt.Sprintf("%d of the %d tests that must pass did not: %s", len(failed), len(mustPass), clip(strings.Join(failed, "; "))))
	}
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("%d were not reported at all (not collected, not run, or the run was cut short): %s", len(missing), clip(strings.Join(missing, ", "))))
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; "), outcomes
	}
	return true, fmt.Sprintf("all %d tests that must pass were reported passed (%d tests reported)", len(mustPass), len(results)), outcomes
}

// TestOutcome is what the report said of one must_pass id: "passed",
// another status, several (a test reported twice, differently), or "not
// reported".
type TestOutcome = record.TestOutcome

// normID brings the id forms of pytest ("dir/test_a.py::TestX::test_y"),
// unittest ("test_a.TestX.test_y") and JUnit (classname "dir.test_a.TestX",
// name "test_y") to one dotted form.
func normID(id string) string {
	id = strings.TrimSpace(id)
	id = strings.ReplaceAll(id, "::", ".")
	id = strings.ReplaceAll(id, "/", ".")
	var parts []string
	for _, p := range strings.Split(id, ".") {
		switch p {
		case "", "py":
			continue
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ".")
}

// parseJUnit reads the testcases of a JUnit XML report (<testsuites> or
// <testsuite> at the root, suites nested or not).
func parseJUnit(r io.Reader) ([]testResult, error) {
	type outcome struct {
		XMLName xml.Name
	}
	type testcase struct {
		Name      string    `xml:"name,attr"`
		Classname string    `xml:"classname,attr"`
		Children  []outcome `xml:",any"`
	}
	dec := xml.NewDecoder(r)
	var out []testResult
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("not valid JUnit XML: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "testcase" {
			continue
		}
		var tc testcase
		if err := dec.DecodeElement(&tc, &se); err != nil {
			return out, fmt.Errorf("not valid JUnit XML: %w", err)
		}
		status := statusPassed
		for _, c := range tc.Children {
			switch c.XMLName.Local {
			case "failure":
				status = statusFailed
			case "error":
				status = statusError
			case "skipped":
				if status == statusPassed {
					status = statusSkipped
				}
			}
		}
		id := tc.Name
		if tc.Classname != "" {
			id = tc.Classname + "." + tc.Name
		}
		out = append(out, testResult{ID: id, Status: status})
	}
	return out, nil
}

var (
	// "PASSED tests/test_a.py::test_x" (-rA summary) and
	// "tests/test_a.py::test_x PASSED [ 50%]" (-v).
	pytestSummary = regexp.MustCompile(`^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)`)
	pytestVerbose = regexp.MustCompile(`^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b`)
	pytestStatus  = map[string]string{"PASSED": statusPassed, "FAILED": statusFailed, "ERROR": statusError, "SKIPPED": statusSkipped, "XFAIL": statusXFail, "XPASS": statusXPass}

	// "test_x (pkg.mod.TestX.test_x) ... ok"; the status may come on a
	// later line after a docstring or the test's own output.
	unittestHead   = regexp.MustCompile(`^(\w+) \(([\w.]+)\)(.*)$`)
	unittestStatus = regexp.MustCompile(`(?:^|\.\.\. )(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$`)
)

// parsePytest reads pytest's terminal report: -rA summary lines, -v lines.
func parsePytest(out string) []testResult {
	var rs []testResult
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r ")
		if m := pytestSummary.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[2], "[") {
			rs = append(rs, testResult{ID: m[2], Status: pytestStatus[m[1]]})
		} else if m := pytestVerbose.FindStringSubmatch(line); m != nil {
			rs = append(rs, testResult{ID: m[1], Status: pytestStatus[m[2]]})
		}
	}
	return rs
}

// parseUnittest reads unittest's verbose (-v) output.
func parseUnittest(out string) []testResult {
	var rs []testResult
	pending := ""
	status := func(s string) string {
		switch {
		case s == "ok":
			return statusPassed
		case s == "FAIL":
			return statusFailed
		case s == "ERROR":
			return statusError
		case strings.HasPrefix(s, "skipped"):
			return statusSkipped
		case s == "expected failure":
			return statusXFail
		}
		return statusXPass
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r ")
		if m := unittestHead.FindStringSubmatch(line); m != nil {
			id := m[2]
			if !strings.HasSuffix(id, "."+m[1]) {
				id += "." + m[1] // before Python 3.11: "(module.Class)"
			}
			pending = id
			line = m[3]
		}
		if pending == "" {
			continue
		}
		if m := unittestStatus.FindStringSubmatch(line); m != nil {
			rs = append(rs, testResult{ID: pending, Status: status(m[1])})
			pending = ""
		}
	}
	return rs
}

// reported reads the tests a clause's report shows: from the JUnit file in
// the report directory (reportDir is its host side), or from the output.
func reported(c contract.Clause, reportDir string, stdout, stderr []byte) ([]testResult, error) {
	switch {
	case c.Report == contract.ReportPytest:
		return parsePytest(string(stdout) + "\n" + string(stderr)), nil
	case c.Report == contract.ReportUnittest:
		return parseUnittest(string(stderr) + "\n" + string(stdout)), nil
	case strings.HasPrefix(c.Report, contract.ReportJUnit):
		rel := strings.TrimPrefix(strings.TrimPrefix(c.Report, contract.ReportJUnit), contract.ReportDir+"/")
		f, err := openReport(reportDir, rel)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return parseJUnit(io.LimitReader(f, maxReport))
	}
	return nil, fmt.Errorf("unknown report %q", c.Report)
}
