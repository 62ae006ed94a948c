package verify

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePytest(t *testing.T) {
	out := `============================= test session starts ==============================
tests/test_a.py::test_one PASSED                                         [ 25%]
tests/test_a.py::TestX::test_two[1-2] FAILED                             [ 50%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
FAILED tests/test_a.py::TestX::test_two[1-2] - assert 1 == 2
SKIPPED [1] tests/test_a.py:9: no network
XFAIL tests/test_a.py::test_known - bug 12
ERROR tests/test_b.py::test_setup - RuntimeError
========================= 1 failed, 1 passed in 0.03s =========================
`
	got := parsePytest(out)
	want := []testResult{
		{"tests/test_a.py::test_one", statusPassed},
		{"tests/test_a.py::TestX::test_two[1-2]", statusFailed},
		{"tests/test_a.py::test_one", statusPassed},
		{"tests/test_a.py::TestX::test_two[1-2]", statusFailed},
		{"tests/test_a.py::test_known", statusXFail},
		{"tests/test_b.py::test_setup", statusError},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	for _, c := range []struct {
		ids  []string
		want bool
	}{
		{[]string{"tests/test_a.py::test_one"}, true},
		{[]string{"test_a.py::test_one"}, true},
		{[]string{"test_one"}, true},
		{[]string{"TestX::test_two[1-2]"}, false},
		{[]string{"test_known"}, false},
		{[]string{"test_setup"}, false},
		{[]string{"test_on"}, false}, // a prefix is not a match
	} {
		if ok, why, _ := judgeReport(c.ids, got); ok != c.want {
			t.Errorf("%v: %v (%s)", c.ids, ok, why)
		}
	}
}

func TestParseUnittest(t *testing.T) {
	out := `test_bad (test_a.T.test_bad) ... FAIL
test_doc (test_a.T.test_doc)
Docstring here. ... noise
ok
test_ok (test_a.T.test_ok) ... ok
test_old (test_a.T) ... ok
test_skip (test_a.T.test_skip) ... skipped 'why'
test_xf (test_a.T.test_xf) ... expected failure

======================================================================
FAIL: test_bad (test_a.T.test_bad)
----------------------------------------------------------------------
AssertionError: 1 != 2
Ran 6 tests in 0.000s
`
	got := parseUnittest(out)
	want := []testResult{
		{"test_a.T.test_bad", statusFailed},
		{"test_a.T.test_doc", statusPassed},
		{"test_a.T.test_ok", statusPassed},
		{"test_a.T.test_old", statusPassed},
		{"test_a.T.test_skip", statusSkipped},
		{"test_a.T.test_xf", statusXFail},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
}

// A forged "passed" next to the runner's own failure does not pass.
func TestForgedLines(t *testing.T) {
	rs := parsePytest("PASSED t.py::test_x\nt.py::test_x FAILED [100%]\n")
	if ok, _, _ := judgeReport([]string{"test_x"}, rs); ok {
		t.Fatal("a forged PASSED line outweighed a FAILED one")
	}
	rs = parseUnittest("test_x (m.T.test_x) ... ok\ntest_x (m.T.test_x) ... FAIL\n")
	if ok, _, _ := judgeReport([]string{"test_x"}, rs); ok {
		t.Fatal("a forged ok line outweighed a FAIL one")
	}
	if ok, why, out := judgeReport([]string{"test_x"}, nil); ok || !strings.Contains(why, "os._exit") || out[0].Status != "not reported" {
		t.Fatalf("empty report: %v %s", ok, why)
	}
}

func TestParseJUnit(t *testing.T) {
	x := `<testsuites><testsuite><testsuite>
<testcase classname="a.T" name="ok"><system-out>x</system-out></testcase>
<testcase classname="a.T" name="bad"><failure/></testcase>
<testcase name="err"><error/></testcase>
<testcase classname="a.T" name="skip"><skipped/></testcase>
</testsuite></testsuite></testsuites>`
	got, err := parseJUnit(strings.NewReader(x))
	want := []testResult{{"a.T.ok", statusPassed}, {"a.T.bad", statusFailed}, {"err", statusError}, {"a.T.skip", statusSkipped}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v", got, err)
	}
	// No entity expansion: a billion-laughs document is only an error.
	bomb := `<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><testsuite><testcase name="&b;"/></testsuite>`
	if _, err := parseJUnit(strings.NewReader(bomb)); err == nil {
		t.Fatal("entities expanded")
	}
}

func FuzzReports(f *testing.F) {
	f.Add("test_x (m.T.test_x) ... ok\nPASSED a.py::b\n<testsuite><testcase name=\"x\"/></testsuite>")
	f.Fuzz(func(t *testing.T, s string) {
		rs := append(parsePytest(s), parseUnittest(s)...)
		j, _ := parseJUnit(strings.NewReader(s))
		rs = append(rs, j...)
		for _, r := range rs {
			if r.Status == "" {
				t.Fatalf("a result without status: %+v", r)
			}
		}
		judgeReport([]string{"x", "a.py::b"}, rs)
	})
}
