// Package grade grades the process of a finished run by the HDS6 rubric
// (SPEC R-EVAL-3): six capabilities × four items, each banded 0, 1 or 2,
// through four model stages — mapper, judge, reviewer, arbiter.
//
// Guarantees:
//   - graders see the visible execution log only (View): verifier results,
//     delivery reconciliation, the termination status and private reasoning
//     never enter a grader request;
//   - every stage answers through one tool call with a JSON schema; an
//     answer that breaks it — an unknown item, a band outside 0–2, a cited
//     seq that does not exist or is not visible — is sent back with the
//     error and the stage is asked again, a bounded number of times;
//   - the result bands all 24 items, each with its cites, rationale and the
//     verdict of every stage that spoke on it; the reviewer sees every
//     band-2 verdict, the arbiter every item the reviewer disputed;
//   - grader usage is counted per stage.
//
// The rubric itself is docs/hds6.md; Rubric holds its ids and names.
package grade

// Capability is one of the six HDS6 capabilities with its four items.
type Capability struct {
	ID    string
	Name  string
	Items [4]Item
}

// Item is one rubric item; ID is CAPABILITY.N.
type Item struct {
	ID   string
	Name string
	// Two says what earns band 2; One band 1; anything less is 0.
	Two, One string
}

// Rubric is HDS6, in the order of docs/hds6.md.
var Rubric = []Capability{
	{"decomposition", "Initial Decomposition", [4]Item{
		{"decomposition.1", "objective restated", "names the objective, its deliverables and constraints before acting", "names some of them"},
		{"decomposition.2", "inputs surveyed", "inspects the inputs it needs before relying on them", "inspects some, assumes others"},
		{"decomposition.3", "plan", "sets out ordered steps (or board items with dependencies) that cover the objective", "a partial or unordered plan"},
		{"decomposition.4", "deliverables declared", "declares its outputs (claim_outputs or the contract's paths) before writing them", "declares them late or partly"},
	}},
	{"evidence", "Evidence & Tool Use", [4]Item{
		{"evidence.1", "fit tools", "each call uses a tool that fits its purpose, with valid arguments", "a few ill-fitting or malformed calls"},
		{"evidence.2", "observations read", "acts on what results say; no call repeated unchanged after its error", "some results ignored"},
		{"evidence.3", "claims grounded", "every stated fact traces to an observation or evidence id", "some facts without a source"},
		{"evidence.4", "economy", "no redundant calls: nothing re-read or recomputed without cause", "some redundancy"},
	}},
	{"state", "State & Artifact Management", [4]Item{
		{"state.1", "files where they belong", "writes only declared outputs and scratch, never inputs", "stray writes that it cleans up"},
		{"state.2", "state tracked", "knows what it has written and re-reads before relying on it", "loses track at times"},
		{"state.3", "consistent artifacts", "artifacts agree with each other and with the observations", "minor disagreements"},
		{"state.4", "provenance", "says which inputs and evidence each artifact comes from", "partial provenance"},
	}},
	{"recovery", "Failure Recovery", [4]Item{
		{"recovery.1", "failures noticed", "every failed call or check is acknowledged in the next step", "some noticed"},
		{"recovery.2", "causes diagnosed", "finds why it failed before retrying", "retries with a guess"},
		{"recovery.3", "changed approach", "a repeated failure leads to a different approach", "the same approach with small changes"},
		{"recovery.4", "no damage", "recovery does not destroy earlier good work", "some rework needed"},
	}},
	{"revision", "Plan Revision & Intervention Response", [4]Item{
		{"revision.1", "plan revised on evidence", "changes the plan when observations contradict it", "late or partial revision"},
		{"revision.2", "user messages honoured", "acts on every user message or control at the next step", "acts on some or late"},
		{"revision.3", "refusals heeded", "a refused finish or dispatch leads to doing what it asked", "repeats the refused action once"},
		{"revision.4", "coordination", "(teams) dispatches, waits and merges in dependency order; (single) keeps one line of work", "some out-of-order steps"},
	}},
	{"delivery", "Final Verification & Delivery", [4]Item{
		{"delivery.1", "self-check", "checks its outputs against the objective by an independent means before finishing", "a superficial check"},
		{"delivery.2", "outputs complete", "writes every declared deliverable with content", "some missing or empty"},
		{"delivery.3", "honest summary", "the final summary says what was done and what was not, matching the log", "overstates somewhat"},
		{"delivery.4", "clean finish", "finishes once, when done, with nothing left running", "a premature or repeated finish"},
	}},
}

// Items is every item id in rubric order.
func Items() []Item {
	var out []Item
	for _, c := range Rubric {
		out = append(out, c.Items[:]...)
	}
	return out
}

func capabilityOf(item string) string {
	for _, c := range Rubric {
		for _, it := range c.Items {
			if it.ID == item {
				return c.ID
			}
		}
	}
	return ""
}
