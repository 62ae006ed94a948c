package inbox

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// BudgetArgs reads the words of `apodex say --budget`: KEY=VALUE pairs
// (see ParseBudget) and exactly one run id, the one word without '='. It
// returns the id, the parsed budget and the pairs as given.
func BudgetArgs(words []string) (id string, budget map[string]string, pairs string, err error) {
	var ids, kv []string
	for _, w := range words {
		if strings.Contains(w, "=") {
			kv = append(kv, w)
		} else {
			ids = append(ids, w)
		}
	}
	switch {
	case len(ids) == 0:
		return "", nil, "", fmt.Errorf("--budget: give the run id, e.g. apodex say --budget turns=+10 deadline=+5m RUN")
	case len(ids) > 1:
		q := make([]string, len(ids))
		for i, w := range ids {
			q[i] = fmt.Sprintf("%q", w)
		}
		return "", nil, "", fmt.Errorf("--budget takes KEY=VALUE pairs and one run id, not %s; e.g. apodex say --budget turns=+10 deadline=+5m RUN", strings.Join(q, ", "))
	}
	pairs = strings.Join(kv, " ")
	b, ok := ParseBudget(pairs)
	if !ok || len(b) != len(kv) {
		return "", nil, "", fmt.Errorf("--budget %q: use KEY=VALUE pairs with turns, tool_calls, tokens, deadline or timeout (e.g. turns=+10 deadline=+5m)", pairs)
	}
	return ids[0], b, pairs, nil
}

// RenderList writes msgs as the table of `apodex messages`; the SEQ of a
// message is the record's, once it was delivered.
func RenderList(w io.Writer, msgs []Message) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSEQ\tCLASS\tTEXT")
	for _, m := range msgs {
		seq := "-"
		if m.State == StateDelivered {
			seq = fmt.Sprint(m.Seq)
		}
		text := []rune(strings.Join(strings.Fields(m.Text), " "))
		if len(text) > 70 {
			text = append(text[:70], '…')
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, seq, m.Class, string(text))
	}
	tw.Flush()
}
