package inbox

import (
	"maps"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		text string
		want Class
	}{
		{"Also produce /outputs/summary.md with the key numbers", ClassRequirementClarification},
		{"I mean the net revenue, not gross", ClassRequirementClarification},
		{"The report should include a risk section", ClassRequirementClarification},
		{"The 2019 figure is wrong, it is 4.2%", ClassFactualCorrection},
		{"Actually, the company was founded in 1998", ClassFactualCorrection},
		{"Focus on the European market first", ClassPriorityChange},
		{"Prioritize the pricing question", ClassPriorityChange},
		{"I uploaded /inputs/sales_2024.csv with the new numbers", ClassNewFilesEvidence},
		{"Here is a link: https://example.org/paper", ClassNewFilesEvidence},
		{"Try a different approach: use the median", ClassHypothesisMethodRevision},
		{"The premise that prices fell is doubtful", ClassHypothesisMethodRevision},
		{"Use only peer-reviewed sources", ClassSourceToolConstraint},
		{"Don't use the web search", ClassSourceToolConstraint},
		{"budget turns=60 tokens=200000", ClassBudgetDeadline},
		{"Extend the deadline by 10m", ClassBudgetDeadline},
		{"You have 30 more minutes", ClassBudgetDeadline},
		{"pause", ClassPauseResumeCancel},
		{"Please pause the run", ClassPauseResumeCancel},
		{"resume", ClassPauseResumeCancel},
		{"Cancel the run now", ClassPauseResumeCancel},
		{"How is it going?", ClassProgressQuery},
		{"What's the status", ClassProgressQuery},
		{"Write the report in Korean", ClassOutputFormatLanguage},
		{"Give me the answer as a table", ClassOutputFormatLanguage},
		{"What's the capital of France?", ClassUnrelatedSideQuestion},
		{"btw, do you like jazz", ClassUnrelatedSideQuestion},
		{"cancel item T3, we don't need it", ClassPriorityChange},
		{"please continue with method B", ClassHypothesisMethodRevision},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := Classify(tt.text); got != tt.want {
				t.Errorf("Classify(%q) = %s, want %s", tt.text, got, tt.want)
			}
		})
	}
	for _, c := range Classes {
		if !c.Valid() {
			t.Errorf("%s not valid", c)
		}
	}
	if Class("other").Valid() {
		t.Error("unknown class valid")
	}
}

func TestChangesContract(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"Also produce /outputs/summary.md with the key numbers", true},
		{"Write the report in Korean", true},
		{"The report should include a risk section", true},
		{"I mean the net revenue, not gross", false},
		{"The 2019 figure is wrong, it is 4.2%", false},
		{"Focus on the European market first", false},
		{"Use only peer-reviewed sources", false},
		{"How is it going?", false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := ChangesContract(Classify(tt.text), tt.text); got != tt.want {
				t.Errorf("ChangesContract(%s, %q) = %v, want %v", Classify(tt.text), tt.text, got, tt.want)
			}
		})
	}
}

func TestParseBudget(t *testing.T) {
	tests := []struct {
		text string
		want map[string]string // nil: not a budget message
	}{
		{"budget turns=60 tokens=200000", map[string]string{"turns": "60", "tokens": "200000"}},
		{"deadline=+10m tool_calls=200", map[string]string{"deadline": "+10m", "tool_calls": "200"}},
		{"extend the deadline by 10m", map[string]string{"deadline": "+10m0s"}},
		{"Extend by 2 hours please", map[string]string{"deadline": "+2h0m0s"}},
		{"give it 20 more turns", map[string]string{"turns": "+20"}},
		{"cut the budget by 5000 tokens", map[string]string{"tokens": "-5000"}},
		{"set the timeout to 2h", map[string]string{"timeout": "2h0m0s"}},
		{"set the deadline to 30 minutes", map[string]string{"deadline": "30m0s"}},
		{"turns to 80", map[string]string{"turns": "80"}},
		{"color=blue", nil},
		{"look at the 2020 data", nil},
		{"add a section on 2020 markets", nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, ok := ParseBudget(tt.text)
			if ok != (tt.want != nil) || (ok && !maps.Equal(got, tt.want)) {
				t.Errorf("ParseBudget(%q) = %v, %v; want %v", tt.text, got, ok, tt.want)
			}
		})
	}
}

func TestAsControl(t *testing.T) {
	tests := []struct {
		text, kind string
		ok         bool
	}{
		{"pause", ControlPause, true},
		{"please stop", ControlPause, true},
		{"resume the run", ControlResume, true},
		{"cancel the run", ControlCancel, true},
		{"extend the deadline by 10m", ControlBudget, true},
		{"focus on Europe", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			kind, _, ok := AsControl(tt.text)
			if kind != tt.kind || ok != tt.ok {
				t.Errorf("AsControl(%q) = %q, %v; want %q, %v", tt.text, kind, ok, tt.kind, tt.ok)
			}
		})
	}
}
