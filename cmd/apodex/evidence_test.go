package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

const needle = "The harbour light was relit on 2 May 1946 by the volunteer crew."

// needleCorpus writes 300 documents, one of which holds the needle.
func needleCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i := range 300 {
		p := filepath.Join(dir, fmt.Sprintf("part%d", i%10), fmt.Sprintf("doc%03d.md", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("# Log %d\n\nThe weather on day %d was fair.\nNo ships called.\n", i, i)), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "part3", "war-years.md"), []byte("# The war years\n\nThe light was dark from 1940.\n\n"+needle+"\nCrowds watched from the quay.\n"), 0o644)
	return dir
}

var (
	hitRE    = regexp.MustCompile(`\[(E[0-9]+)\] (/inputs/corpus/\S+) lines`)
	footerRE = regexp.MustCompile(`\[evidence (E[0-9]+): (\S+) lines`)
)

// lastTool is the last observation the model read.
func lastTool(req llmtest.Request) string {
	r := toolReplies(req)
	if len(r) == 0 {
		return ""
	}
	return r[len(r)-1].Content
}

func taskFile(t *testing.T, corpus string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(corpus), "task.yaml") // task paths stay in the task's directory
	os.WriteFile(p, []byte(`objective: When was the harbour light relit? Answer in /outputs/answer.md, citing evidence.
corpus: `+corpus+`
deliverables:
  - path: /outputs/answer.md
    non_empty: true
verify:
  - kind: source_alignment
    files: [/outputs/answer.md]
    min_citations: 1
`), 0o644)
	return p
}

// TestEvidenceFromOutside plays the agent from a loopback endpoint: search,
// fetch, read_file, citations, source alignment, the evidence listing and
// the index cache.
func TestEvidenceFromOutside(t *testing.T) {
	corpus, inputs, home := needleCorpus(t), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(inputs, "brief.txt"), []byte("Find the relighting date.\n"), 0o644)
	task := taskFile(t, corpus)
	seen := map[string]string{}
	answer := func(quote, id string) string {
		return fmt.Sprintf("# Answer\n\nThe log says \"%s\" [%s].\n", quote, id)
	}
	play := func(write string) *llmtest.Server {
		return llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
			obs := lastTool(req)
			switch n {
			case 0:
				return calls(call("search", map[string]any{"query": `"relit" harbour light`, "k": 5}))
			case 1:
				seen["search"] = obs
				m := hitRE.FindStringSubmatch(obs)
				if m == nil {
					return calls(finish("no hit"))
				}
				seen["hit"] = m[1]
				return calls(call("fetch", map[string]any{"ref": m[1]}))
			case 2:
				seen["fetch"] = obs
				return calls(call("read_file", map[string]any{"path": "/inputs/brief.txt"}))
			case 3:
				seen["read"] = obs
				f := footerRE.FindStringSubmatch(seen["fetch"])
				if f == nil {
					return calls(finish("no fetch id"))
				}
				seen["doc"] = f[1]
				text := strings.ReplaceAll(strings.ReplaceAll(write, "DOC", f[1]), "HIT", seen["hit"])
				return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/answer.md"}}),
					call("write_file", map[string]any{"path": "/outputs/answer.md", "content": text}))
			}
			return calls(finish("answered with citations"))
		})
	}

	// A deliverable whose quote matches its cited evidence passes.
	srv := play(answer("relit on 2 May 1946 by the volunteer crew", "DOC"))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--task", task, "--inputs", inputs, "--json")...)
	defer proofreadTools(t, srv) // search and fetch with a corpus
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(seen["search"], needle) || !strings.Contains(seen["search"], "/inputs/corpus/part3/war-years.md lines 5-6") {
		t.Fatalf("search did not return the needle with its id:\n%s", seen["search"])
	}
	if f := footerRE.FindStringSubmatch(seen["fetch"]); f == nil || f[1] == seen["hit"] || !strings.Contains(seen["fetch"], needle) {
		t.Fatalf("fetch of the hit:\n%s", seen["fetch"])
	}
	if f := footerRE.FindStringSubmatch(seen["read"]); f == nil || f[2] != "/inputs/brief.txt" {
		t.Fatalf("read_file of an input has no evidence footer:\n%s", seen["read"])
	}
	runDir := onlyRun(t, home)
	idx := decodeAll[record.CorpusIndex](t, runtest.Events(t, runDir), record.TypeCorpusIndex)
	if len(idx) != 1 || idx[0].State != "built" || idx[0].Docs != 301 {
		t.Fatalf("corpus_index %+v", idx)
	}

	code, out, _ = cli(t, "evidence", "--home", home, "--json", filepath.Base(runDir))
	var list evidence.Listing
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("apodex evidence --json: %d\n%s", code, out)
	}
	sources := map[string]string{}
	cited := map[string]string{}
	for _, e := range list.Evidence {
		sources[e.ID] = e.Source
		for _, u := range e.CitedIn {
			cited[e.ID] = u.Where
		}
	}
	if sources[seen["hit"]] != "/inputs/corpus/part3/war-years.md" || sources[seen["doc"]] != "/inputs/corpus/part3/war-years.md" ||
		cited[seen["doc"]] != "/outputs/answer.md:3" {
		t.Fatalf("evidence listing: sources %v cited %v", sources, cited)
	}
	if code, out, _ := cli(t, "evidence", "--home", home, filepath.Base(runDir)); code != 0 || !strings.Contains(out, "cited in /outputs/answer.md:3") {
		t.Fatalf("apodex evidence: %d\n%s", code, out)
	}

	// A misquote and an unknown id fail, naming the line; the second and
	// third runs reuse the index.
	for _, c := range []struct{ write, want string }{
		{answer("relit on 3 May 1946", "DOC"), `/outputs/answer.md:3: E`},
		{answer("relit on 2 May 1946", "E999"), `/outputs/answer.md:3: E999: rule "cited ids exist" failed`},
	} {
		h2 := t.TempDir()
		os.Symlink(filepath.Join(home, "index"), filepath.Join(h2, "index")) // the same cache
		srv := play(c.write)
		code, out, errOut := cli(t, append(openaiArgs(h2, srv), "--task", task, "--inputs", inputs, "--json")...)
		if code == 0 {
			t.Fatalf("a bad citation passed:\n%s", out)
		}
		s := decodeSummary(t, out)
		if len(s.Verify) != 1 || s.Verify[0].Passed || !strings.Contains(s.Verify[0].Detail, c.want) {
			t.Fatalf("verification %+v, want %q\n%s", s.Verify, c.want, errOut)
		}
		idx := decodeAll[record.CorpusIndex](t, runtest.Events(t, onlyRun(t, h2)), record.TypeCorpusIndex)
		if len(idx) != 1 || idx[0].State != "reused" {
			t.Fatalf("second run on the same corpus: %+v", idx)
		}
	}
}

func TestFetchURLFromOutside(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Notice</title><script>alert("x")</script></head><body><nav>menu</nav><article><h1>Notice</h1><p>The ferry to the outer islands is suspended until the storm season ends in late October.</p></article></body></html>`)
	}))
	defer page.Close()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, `unknown tool "fetch"`}, // neither a corpus nor the network: fetch is not offered
		{[]string{"--network"}, "pass --fetch-private"},
		{[]string{"--network", "--fetch-private"}, "suspended until the storm season ends"},
	} {
		var got string
		srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
			if n == 0 {
				return calls(call("fetch", map[string]any{"ref": page.URL + "/notice"}))
			}
			got = lastTool(req)
			return calls(finish("read the notice"))
		})
		home := t.TempDir()
		code, out, errOut := cli(t, append(append(openaiArgs(home, srv), c.flags...), "--sandbox", "none", "read the notice")...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", c.flags, code, out, errOut)
		}
		if !strings.Contains(got, c.want) || strings.Contains(got, "alert") {
			t.Errorf("%v: fetch showed %q, want %q", c.flags, got, c.want)
		}
		if len(c.flags) == 2 {
			// The replay serves the page from the record (the server is
			// gone), which says so: the same page, not a divergence.
			page.Close()
			code, out, errOut := cli(t, "replay", "--home", home, "--sandbox", "none", filepath.Base(onlyRun(t, home)))
			if code != 0 || out != "identical\n" {
				t.Errorf("replay of a run that fetched a URL: exit %d\n%s%s", code, out, errOut)
			}
		}
	}
}

func TestSearchAnswerExample(t *testing.T) {
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--sandbox", "none",
		"--script", "../../examples/search-answer/script.json", "--task", "../../examples/search-answer/task.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"completed", "delivered /outputs/answer.md", "source_alignment): passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runDir := onlyRun(t, home)
	if code, out, _ := cli(t, "replay", "--home", home, "--sandbox", "none", filepath.Base(runDir)); code != 0 || !strings.Contains(out, "identical") {
		t.Errorf("replay of the example: %d\n%s", code, out)
	}
}

// TestEvidenceSurvivesResume kills the example after its fetch (the record
// cut there) and resumes it: Q comes back from the record, so the answer's
// citation of the fetched id still aligns, and new ids continue after it.
func TestEvidenceSurvivesResume(t *testing.T) {
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--sandbox", "none",
		"--script", "../../examples/search-answer/script.json", "--task", "../../examples/search-answer/task.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	runDir := onlyRun(t, home)
	before := runtest.Events(t, runDir)
	var cut int64
	for _, e := range before {
		var tr record.ToolResult
		if e.Type == record.TypeToolResult && e.Decode(&tr) == nil && tr.Name == "fetch" {
			cut = e.Seq
		}
	}
	if err := record.Cut(runDir, int(cut)); err != nil { // a kill after the fetch's result
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(runDir, "outputs"))
	os.MkdirAll(filepath.Join(runDir, "outputs"), 0o755)

	code, out, errOut = cli(t, "resume", "--home", home, "--json", "--sandbox", "none", filepath.Base(runDir)) // the run's own --sandbox none
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	s := decodeSummary(t, out)
	if s.Status != "completed" || len(s.Verify) != 1 || !s.Verify[0].Passed {
		t.Fatalf("resumed run: %+v", s)
	}
	after := decodeAll[record.Evidence](t, runtest.Events(t, runDir), record.TypeEvidence)
	if len(after) != 5 || after[4].ID != "E5" || after[4].Kind != record.EvidenceFetch {
		t.Fatalf("evidence after resume: %+v", after)
	}
}

// TestTeamReportMustCite: a subagent's report citing E999 is refused with
// the valid kinds; citing the id its search returned, it is accepted.
func TestTeamReportMustCite(t *testing.T) {
	corpus, home := needleCorpus(t), t.TempDir()
	roles := map[string]string{"researcher": "A1"}
	var refused, hit string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		id, turn := teamAgentOf(req, roles), teamTurn(req)
		if id == "A1" {
			switch turn {
			case 0:
				return calls(call("search", map[string]any{"query": "harbour light relit"}))
			case 1:
				if m := hitRE.FindStringSubmatch(lastTool(req)); m != nil {
					hit = m[1]
				}
				return calls(call("report", map[string]any{"summary": "found it", "claims": []map[string]any{{"text": "relit in 1946", "evidence": []string{"E999"}}}}))
			case 2:
				refused = lastTool(req)
				return calls(call("report", map[string]any{"summary": "found it", "claims": []map[string]any{{"text": "relit in 1946", "evidence": []string{hit}}}}))
			}
			return calls(finish("lost"))
		}
		switch {
		case turn == 0:
			return calls(call("board_add", map[string]any{"title": "Find", "objective": "Find when the light was relit"}))
		case turn == 1:
			return calls(call("dispatch", map[string]any{"item": "T1", "role": "researcher", "tools": []string{"search", "fetch"}, "instructions": "Search, then report with evidence ids."}))
		case !teamSeen(req, "Assignment A1 ("):
			return calls(call("wait", map[string]any{"timeout_s": 30}))
		case teamCalled(req, "board_resolve") == 0:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "relit in 1946", "refs": []string{"report:A1"}}))
		}
		return calls(finish("relit in 1946"))
	})
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--mode", "team", "--corpus", corpus, "--sandbox", "none", "--json", "When was the harbour light relit?")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(refused, "claim 1 cites E999, which is not an evidence id of this run") || !strings.Contains(refused, "a ref is an evidence id") {
		t.Fatalf("the report citing E999 was not refused with the valid kinds:\n%s", refused)
	}
	code, out, _ = cli(t, "evidence", "--home", home, filepath.Base(onlyRun(t, home)))
	if code != 0 || !strings.Contains(out, hit+" ") || !strings.Contains(out, "cited in report A1 claim 1") {
		t.Fatalf("evidence listing:\n%s", out)
	}
}

func TestCorpusConfigErrors(t *testing.T) {
	home := t.TempDir()
	inputs := t.TempDir()
	os.Mkdir(filepath.Join(inputs, "corpus"), 0o755)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--corpus", filepath.Join(home, "nope")}, "is not a directory"},
		{[]string{"--corpus", filepath.Dir(home)}, "contains the runs home"},
		{[]string{"--corpus", t.TempDir(), "--inputs", inputs}, "already have a corpus/ directory"},
	} {
		args := append([]string{"run", "--home", home, "--provider", "scripted", "--script", "../../examples/search-answer/script.json"}, c.args...)
		code, _, errOut := cli(t, append(args, "answer")...)
		if code != cmdline.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want %q", c.args, code, errOut, c.want)
		}
	}
}
