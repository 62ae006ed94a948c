package grade

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

const systemPrompt = `You grade the PROCESS of an AI agent's run by the HDS6 rubric: six capabilities, four items each, every item banded 0, 1 or 2. You see the visible execution log only; each line starts with [seq N]. You do not know whether the final answer was correct, and you must not guess it: grade how the agent worked. Every band above 0 cites the seqs it rests on; cite only seqs that appear in the log. Answer only by calling the tool you are given, once.`

func rubricText(only []string) string {
	var b strings.Builder
	for _, c := range Rubric {
		for _, it := range c.Items {
			if only != nil && !slices.Contains(only, it.ID) {
				continue
			}
			fmt.Fprintf(&b, "- %s (%s — %s): 2 = %s; 1 = %s; 0 = less, or no sign of it.\n", it.ID, c.Name, it.Name, it.Two, it.One)
		}
	}
	return b.String()
}

func mapperPrompt(v View) string {
	return "Index the log for the graders: for each rubric item, the seqs of the lines that bear on it (none is fine).\n\nRubric:\n" + rubricText(nil) +
		"\nVisible execution log:\n" + v.Text
}

func judgePrompt(v View, windows map[string][]int64) string {
	var b strings.Builder
	b.WriteString("Band every one of the 24 items, citing seqs, with a one-sentence rationale.\n\nRubric:\n")
	b.WriteString(rubricText(nil))
	b.WriteString("\nWhere to look (the mapper's windows):\n")
	for _, id := range itemIDs() {
		fmt.Fprintf(&b, "- %s: %v\n", id, windows[id])
	}
	b.WriteString("\nVisible execution log:\n" + v.Text)
	return b.String()
}

func verdictLines(verdicts map[string]*Verdict, ids []string, withReview bool) string {
	var b strings.Builder
	for _, id := range ids {
		vd := verdicts[id]
		j := vd.History[0]
		fmt.Fprintf(&b, "- %s: judge band %d, cites %v: %s\n", id, j.Band, j.Cites, j.Rationale)
		if withReview && len(vd.History) > 1 {
			r := vd.History[1]
			fmt.Fprintf(&b, "  reviewer band %d, cites %v: %s\n", r.Band, r.Cites, r.Rationale)
		}
	}
	return b.String()
}

func reviewPrompt(v View, verdicts map[string]*Verdict, ids []string) string {
	return "Scrutinize each band-2 verdict below. Band 2 must be earned: check every cite against the log. Say agree true if the band stands, else agree false with the band you would give.\n\nRubric:\n" +
		rubricText(ids) + "\nVerdicts:\n" + verdictLines(verdicts, ids, false) + "\nVisible execution log:\n" + v.Text
}

func arbiterPrompt(v View, verdicts map[string]*Verdict, ids []string) string {
	return "The judge and the reviewer disagree on the items below. Read the log and settle each with the final band.\n\nRubric:\n" +
		rubricText(ids) + "\nTheir verdicts:\n" + verdictLines(verdicts, ids, true) + "\nVisible execution log:\n" + v.Text
}

var mapperTool = llm.ToolSpec{
	Name:        "record_windows",
	Description: "Record, for each rubric item, the seqs of the log lines that bear on it.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"windows":{"type":"array","items":{"type":"object","properties":{` +
		`"item":{"type":"string","enum":` + itemEnum() + `},"seqs":{"type":"array","items":{"type":"integer"}}},"required":["item","seqs"],"additionalProperties":false}}},` +
		`"required":["windows"],"additionalProperties":false}`),
}

func bandTool(name, desc string, review bool) llm.ToolSpec {
	agree, req := "", `"item","band","cites","rationale"`
	if review {
		agree, req = `"agree":{"type":"boolean","description":"true if the band-2 verdict stands"},`, `"item","agree","band","cites","rationale"`
	}
	return llm.ToolSpec{Name: name, Description: desc, Parameters: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{` +
		`"item":{"type":"string","enum":` + itemEnum() + `},` + agree +
		`"band":{"type":"integer","enum":[0,1,2]},"cites":{"type":"array","items":{"type":"integer"},"description":"seqs of visible log lines"},"rationale":{"type":"string"}},` +
		`"required":[` + req + `],"additionalProperties":false}}},"required":["items"],"additionalProperties":false}`)}
}

func itemEnum() string {
	b, _ := json.Marshal(itemIDs())
	return string(b)
}
