package gen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// order is one order row; cents avoid float drift in the reference answer.
type order struct {
	id       string
	date     string // YYYY-MM-DD
	cents    int    // -1: missing
	currency string
	status   string
}

var currencies = []string{"USD", "EUR", "GBP", "JPY", "CHF"}

// genFile makes a file world: orders spread over CSV and JSON exports with
// currencies, a time window, overlapping exports (duplicates), missing
// amounts, amounts in cents, and a rule stated only in a note, each added
// from some level on; the answer is the total revenue in USD.
func genFile(rng *rand.Rand, s Spec, w *world) (map[string]any, error) {
	L := s.Level
	rates := map[string]float64{"USD": 1}
	for _, c := range currencies[1:] {
		rates[c] = float64(50+rng.IntN(100)) / 100
	}
	rates["JPY"] = float64(60+rng.IntN(30)) / 10000
	useCur := L >= 2
	window := L >= 3
	start, end := "2024-01-01", "2024-12-31"
	if window {
		m := 2 + rng.IntN(3)
		start, end = fmt.Sprintf("2024-%02d-01", m), fmt.Sprintf("2024-%02d-%02d", m+1, 30)
	}
	nFiles := map[int]int{1: 1, 2: 1, 3: 2, 4: 3, 5: 3}[L]
	rows := 8 + 4*L
	var all [][]order
	n := 0
	for f := 0; f < nFiles; f++ {
		var os []order
		for i := 0; i < rows; i++ {
			n++
			o := order{id: fmt.Sprintf("A%04d", 1000+n*7+rng.IntN(7)), cents: 500 + rng.IntN(90000), currency: "USD", status: "paid"}
			o.date = fmt.Sprintf("2024-%02d-%02d", 1+rng.IntN(8), 1+rng.IntN(28))
			if useCur {
				o.currency = pick(rng, currencies)
			}
			if L >= 4 && rng.IntN(6) == 0 {
				o.cents = -1
			}
			if L >= 5 && rng.IntN(5) == 0 {
				o.status = "refunded"
			}
			os = append(os, o)
		}
		all = append(all, os)
	}
	if L >= 3 { // overlapping exports: rows repeated within and across files
		for k := 0; k < L; k++ {
			src := all[rng.IntN(len(all))]
			d := src[rng.IntN(len(src))]
			dst := rng.IntN(len(all))
			all[dst] = append(all[dst], d)
		}
	}
	// The reference answer.
	seen := map[string]bool{}
	total := 0.0
	for _, os := range all {
		for _, o := range os {
			switch {
			case seen[o.id]:
				continue
			case o.date < start || o.date > end, o.cents < 0, o.status == "refunded":
				seen[o.id] = true
				continue
			}
			seen[o.id] = true
			total += float64(o.cents) / 100 * rates[o.currency]
		}
	}
	answer := fmt.Sprintf("%.2f", total)
	// The inputs.
	var notes []string
	transitions := nFiles
	for f, os := range all {
		if f == 2 { // the third export is JSON, amounts in cents
			w.put("inputs/orders_online.json", ordersJSON(os, L))
			continue
		}
		name := map[int]string{0: "orders.csv", 1: "orders_eu.csv"}[f]
		w.put("inputs/"+name, ordersCSV(os, L))
	}
	if useCur {
		w.put("inputs/rates.json", ratesJSON(rates, "2024 average: USD per 1 unit of each currency"))
		notes = append(notes, "Amounts are in the order's own currency; convert with /inputs/rates.json (USD per unit).")
		transitions++
	}
	if window {
		notes = append(notes, fmt.Sprintf("Revenue is reported for orders placed from %s to %s inclusive.", start, end))
		transitions++
	}
	if L >= 3 {
		notes = append(notes, "The exports overlap: an order_id counts once, however often it appears.")
		transitions++
	}
	if L >= 4 {
		notes = append(notes, "A row without an amount is a pending order: it is not revenue. orders_online.json gives amounts in cents.")
		transitions += 2
	}
	if L >= 5 {
		stale := map[string]float64{}
		for c, r := range rates {
			stale[c] = r * 1.1
		}
		stale["USD"] = 1
		w.put("inputs/rates_2023.json", ratesJSON(stale, "2023 average (superseded)"))
		w.put("inputs/archive/orders_2023.csv", ordersCSV(all[0][:4], 1))
		notes = append(notes, "Finance, later memo: refunded orders (status refunded) are not revenue. rates_2023.json and archive/ are last year's and do not apply.")
		transitions += 2
	}
	w.put("inputs/notes.txt", lines(append([]string{"Accounting notes for the revenue report."}, notes...)...))
	candidates := 0
	for p := range w.files {
		if strings.HasPrefix(p, "inputs/") {
			candidates++
		}
	}
	w.put("tests/expected.txt", answer+"\n")
	w.put("solution/outputs/total.txt", answer+"\n")
	budget := budgetFor(L)
	objective := "Sum the amount column of /inputs/orders.csv."
	if L >= 2 {
		objective = "Compute the total revenue in US dollars of the orders in /inputs, following the rules in /inputs/notes.txt."
	}
	objective += " Write the total, rounded to 2 decimals, as a plain number (no currency sign) to /outputs/total.txt."
	diff := pressure(candidates, transitions, budget)
	return map[string]any{
		"difficulty":   diff,
		"objective":    objective,
		"budget":       map[string]any{"turns": budget, "tool_calls": budget},
		"deliverables": []any{map[string]any{"path": "/outputs/total.txt", "non_empty": true}},
		"verify": []any{map[string]any{
			"kind": "recompute", "name": "total matches the recomputed revenue",
			"command": "cat /tests/expected.txt", "files": "tests", "compare": "/outputs/total.txt", "tolerance": 1e-6,
		}},
	}, nil
}

func ordersCSV(os []order, level int) string {
	var b strings.Builder
	b.WriteString("order_id,date,amount,currency")
	if level >= 5 {
		b.WriteString(",status")
	}
	b.WriteString("\n")
	for _, o := range os {
		amt := ""
		if o.cents >= 0 {
			amt = fmt.Sprintf("%d.%02d", o.cents/100, o.cents%100)
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s", o.id, o.date, amt, o.currency)
		if level >= 5 {
			b.WriteString("," + o.status)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func ordersJSON(os []order, level int) string {
	type row struct {
		ID     string `json:"id"`
		Placed string `json:"placed"`
		Cents  *int   `json:"amount_cents"`
		Cur    string `json:"currency"`
		Status string `json:"status,omitempty"`
	}
	var out []row
	for _, o := range os {
		r := row{ID: o.id, Placed: o.date, Cur: o.currency}
		if o.cents >= 0 {
			c := o.cents
			r.Cents = &c
		}
		if level >= 5 {
			r.Status = o.status
		}
		out = append(out, r)
	}
	b, _ := json.MarshalIndent(map[string]any{"orders": out}, "", "  ")
	return string(b) + "\n"
}

func ratesJSON(rates map[string]float64, note string) string {
	b, _ := json.MarshalIndent(map[string]any{"note": note, "usd_per_unit": rates}, "", "  ")
	return string(b) + "\n"
}
