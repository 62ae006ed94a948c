package gen

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strings"
)

// isolateModule is the hidden tests' runner module (isolate.py): the code
// under test runs in a process of its own that cannot read the hidden
// tests or reach into the runner.
//
//go:embed isolate.py
var isolateModule string

// The ledger package: a linear chain report → totals → tax → pricing →
// parse → units. A level-L world seeds one bug in module L of the chain,
// so the visible failing test (of report.render) is L modules from its
// cause.
var codeChain = []string{"report", "totals", "tax", "pricing", "parse", "units"}

// trapCents are prices whose float value times 100 truncates one cent low.
var trapCents = []int{29, 57, 58, 113, 115, 201, 226, 251, 402, 452, 1229}

type codeParams struct {
	bulkQty, bulkPct, taxPct int
}

type codeLine struct {
	sku   string
	qty   string // as written: "4", "2dz", "3pk"
	cents int
}

func genCode(rng *rand.Rand, s Spec, w *world) (map[string]any, error) {
	L := s.Level
	p := codeParams{bulkQty: 5 + rng.IntN(8), bulkPct: 5 + rng.IntN(16), taxPct: 5 + rng.IntN(21)}
	buggy := codeChain[L]
	for _, m := range codeChain {
		w.put("workspace/ledger/"+m+".py", codeModule(m, p, m == buggy))
		w.put("solution/workspace/ledger/"+m+".py", codeModule(m, p, false))
	}
	for _, m := range codeChain {
		if m != buggy {
			delete(w.files, "solution/workspace/ledger/"+m+".py")
		}
	}
	w.put("workspace/ledger/__init__.py", "\"\"\"ledger: order lines to a taxed, discounted total.\"\"\"\n")
	// The visible data: 3+L lines, with a trigger for the seeded bug.
	visible := codeData(rng, p, 3+L, buggy)
	w.put("workspace/data/orders.txt", dataText(visible))
	w.put("workspace/tests/test_report.py", lines(
		"import pathlib, unittest",
		"from ledger import report",
		"",
		"DATA = pathlib.Path(__file__).resolve().parent.parent / \"data\" / \"orders.txt\"",
		"",
		"class TestReport(unittest.TestCase):",
		"    def test_orders(self):",
		"        got = report.render(DATA.read_text().splitlines())",
		fmt.Sprintf("        self.assertEqual(got, %q)", render(visible, p)),
		"",
		"if __name__ == \"__main__\":",
		"    unittest.main()",
	))
	// The hidden tests: the visible case inlined, a case with every
	// trigger, and one unit test per module that pins its contract.
	every := codeData(rng, p, 8, "")
	w.put("tests/test_hidden.py", hiddenTests(visible, every, p))
	w.put("tests/isolate.py", isolateModule)
	w.put("workspace/README.md", lines(
		"# ledger",
		"",
		"Turns order lines `sku,qty,price` (price in dollars; qty a count or `Ndz` / `Npk`)",
		"into a one-line report. Run the tests with:",
		"",
		"    cd /workspace && python3 -m unittest discover -s tests",
	))
	budget := budgetFor(L)
	diff := map[string]float64{
		"dependency_depth":   float64(L + 1),
		"state_depth":        float64(3 + L),
		"failure_distance":   float64(L),
		"test_observability": round4(1 / float64(L+1)),
	}
	return map[string]any{
		"difficulty": diff,
		"objective": "The ledger package in /workspace/ledger computes a wrong total: /workspace/tests/test_report.py fails " +
			"(cd /workspace && python3 -m unittest discover -s tests). Find the cause and fix it in /workspace/ledger; do not change the tests or the data. Hidden tests pin the behaviour of every module.",
		"budget": map[string]any{"turns": budget, "tool_calls": budget},
		"verify": []any{map[string]any{
			"kind": "tests", "name": "hidden tests pass",
			// Isolated (-I): nothing of /workspace is on the runner's path,
			// so no planted sitecustomize.py or unittest.py runs in it;
			// the tests run the ledger in processes of their own
			// (isolate.py).
			"command": "python3 -I -m unittest discover -s /tests -t /tests -p 'test_*.py'",
			"files":   "tests",
		}},
	}, nil
}

// codeData makes n lines; it places a trigger for bug (or for every bug
// when bug is "").
func codeData(rng *rand.Rand, p codeParams, n int, bug string) []codeLine {
	var out []codeLine
	for i := 0; i < n; i++ {
		out = append(out, codeLine{sku: fmt.Sprintf("sku-%c%d", 'a'+rune(rng.IntN(26)), 10+rng.IntN(90)),
			qty: fmt.Sprint(1 + rng.IntN(p.bulkQty-1)), cents: 100 + rng.IntN(4000)})
	}
	trig := map[string]func(l *codeLine){
		"units":   func(l *codeLine) { l.qty = fmt.Sprintf("%ddz", 1+rng.IntN(3)) },
		"parse":   func(l *codeLine) { l.cents = pick(rng, trapCents) },
		"pricing": func(l *codeLine) { l.qty = fmt.Sprint(p.bulkQty) },
		"tax": func(l *codeLine) {
			if !taxRoundsUp(l, p) { // this line's quantity × tax is a multiple of 100
				taxTrigger(out, l, p)
			}
		},
		"totals": func(l *codeLine) {},
	}
	mods := []string{bug}
	if bug == "" {
		mods = []string{"units", "parse", "pricing", "tax"}
	}
	for _, m := range mods {
		if f, ok := trig[m]; ok {
			f(&out[rng.IntN(len(out)-1)]) // never the last line: totals' bug drops it
		}
	}
	if bug == "tax" || bug == "" {
		f := trig["tax"]
		f(&out[len(out)-1])
	}
	return out
}

// taxRoundsUp raises l's price until its tax rounds up (line cents × tax
// % 100 ≥ 50), reporting whether it does within 10,000 cents; if not
// (the quantity × tax is a multiple of 100, say 4 at 25%: no price moves
// the remainder), l is left as it was.
func taxRoundsUp(l *codeLine, p codeParams) bool {
	cents := l.cents
	for range 10000 {
		if (lineCents(*l, p)*p.taxPct)%100 >= 50 {
			return true
		}
		l.cents++
	}
	l.cents = cents
	return false
}

// taxTrigger places the tax bug's trigger where l could not take it: on
// another line with a plain quantity, or else on l with the next quantity
// that lets it (below the bulk quantity).
func taxTrigger(ls []codeLine, l *codeLine, p codeParams) {
	for i := range ls {
		if &ls[i] != l && !strings.HasSuffix(ls[i].qty, "dz") && taxRoundsUp(&ls[i], p) {
			return
		}
	}
	for q := 1; q < p.bulkQty; q++ {
		l.qty = fmt.Sprint(q)
		if taxRoundsUp(l, p) {
			return
		}
	}
}

func qtyEach(q string) int {
	var n int
	switch {
	case strings.HasSuffix(q, "dz"):
		fmt.Sscan(strings.TrimSuffix(q, "dz"), &n)
		return n * 12
	case strings.HasSuffix(q, "pk"):
		fmt.Sscan(strings.TrimSuffix(q, "pk"), &n)
		return n * 6
	}
	fmt.Sscan(q, &n)
	return n
}

func lineCents(l codeLine, p codeParams) int {
	q := qtyEach(l.qty)
	c := q * l.cents
	if q >= p.bulkQty {
		c -= c * p.bulkPct / 100
	}
	return c
}

func render(ls []codeLine, p codeParams) string {
	total := 0
	for _, l := range ls {
		c := lineCents(l, p)
		total += c + (c*p.taxPct+50)/100
	}
	return fmt.Sprintf("items=%d total=%d.%02d", len(ls), total/100, total%100)
}

func dataText(ls []codeLine) string {
	var b strings.Builder
	b.WriteString("# sku,qty,price\n")
	for _, l := range ls {
		fmt.Fprintf(&b, "%s,%s,%d.%02d\n", l.sku, l.qty, l.cents/100, l.cents%100)
	}
	return b.String()
}

func pyLines(ls []codeLine) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(dataText(ls)), "\n") {
		parts = append(parts, fmt.Sprintf("%q", l))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func hiddenTests(visible, every []codeLine, p codeParams) string {
	c := 1000 * p.bulkQty
	check := func(expr string, want any) string {
		return fmt.Sprintf("        self.assertEqual(call(%q), %s)", expr, pyValue(want))
	}
	return lines(
		`"""Hidden tests of the ledger in /workspace. The ledger never runs in`,
		"this process: call() evaluates an expression with it in a process of its",
		`own (isolate.run), which cannot read these tests, and compares the JSON`,
		`it printed."""`,
		"import json, sys, unittest",
		"import isolate",
		"",
		"PRELUDE = \"import json, sys\\nsys.path.insert(0, '/workspace')\\nfrom ledger import report, totals, tax, pricing, parse, units\\n\"",
		"",
		"def call(expr):",
		"    r = isolate.run([sys.executable, '-I', '-c', PRELUDE + 'print(json.dumps(' + expr + '))'])",
		"    out = r.stdout.strip().splitlines()",
		"    if r.returncode != 0 or not out:",
		"        raise AssertionError('%s: exit %d: %s' % (expr, r.returncode, r.stderr.strip()[-800:]))",
		"    return json.loads(out[-1])",
		"",
		"class TestHidden(unittest.TestCase):",
		"    def test_visible_case(self):",
		check("report.render("+pyLines(visible)+")", render(visible, p)),
		"    def test_every_rule(self):",
		check("report.render("+pyLines(every)+")", render(every, p)),
		"    def test_units(self):",
		check("units.to_each('2dz')", 24),
		check("units.to_each('3pk')", 18),
		check("units.to_each(' 7 ')", 7),
		"    def test_parse(self):",
		check("parse.parse_line('ab-1, 2, 12.29')", pyDict{{"sku", "AB-1"}, {"qty", 2}, {"unit_cents", 1229}}),
		check("parse.parse_line('x,1,0.57')['unit_cents']", 57),
		"    def test_pricing(self):",
		check(fmt.Sprintf("pricing.line_cents({'qty': %d, 'unit_cents': 1000})", p.bulkQty), c-c*p.bulkPct/100),
		check(fmt.Sprintf("pricing.line_cents({'qty': %d, 'unit_cents': 1000})", p.bulkQty-1), 1000*(p.bulkQty-1)),
		"    def test_tax(self):",
		check("tax.with_tax(1000)", 1000+(1000*p.taxPct+50)/100),
		check("tax.with_tax(999)", 999+(999*p.taxPct+50)/100),
		"    def test_totals(self):",
		check("totals.summarize(['a,1,1.00', 'b,1,2.00'])['items']", 2),
		check("totals.summarize(['a,1,1.00', 'b,1,2.00'])['total_cents']", (100+(100*p.taxPct+50)/100)+(200+(200*p.taxPct+50)/100)),
		"",
		"if __name__ == \"__main__\":",
		"    unittest.main()",
	)
}

// pyDict is a Python dict literal with its keys in order.
type pyDict [][2]any

// pyValue is v as a Python literal: an int, a string (Go's quoting is
// Python's for the ASCII the generator writes) or a pyDict.
func pyValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case pyDict:
		var parts []string
		for _, kv := range v {
			parts = append(parts, pyValue(kv[0])+": "+pyValue(kv[1]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// codeModule is one module of the chain, with its seeded bug when buggy.
func codeModule(m string, p codeParams, buggy bool) string {
	b := func(good, bad string) string {
		if buggy {
			return bad
		}
		return good
	}
	switch m {
	case "report":
		return lines(
			`"""One-line report of an order list."""`,
			"from . import totals",
			"",
			"def render(lines):",
			"    t = totals.summarize(lines)",
			`    return "items=%d total=%d.%02d" % (t["items"], t["total_cents"] // 100, t["total_cents"] % 100)`)
	case "totals":
		return lines(
			`"""Sum of the taxed line amounts."""`,
			"from . import tax",
			"",
			"def summarize(lines):",
			"    amounts = tax.taxed(lines)",
			"    total = 0",
			b("    for i in range(len(amounts)):", "    for i in range(len(amounts) - 1):"),
			"        total += amounts[i]",
			`    return {"items": len(amounts), "total_cents": total}`)
	case "tax":
		return lines(
			`"""Sales tax, rounded half up to the cent."""`,
			"from . import pricing",
			"",
			fmt.Sprintf("TAX_PCT = %d", p.taxPct),
			"",
			"def with_tax(cents):",
			b("    return cents + (cents * TAX_PCT + 50) // 100", "    return cents + cents * TAX_PCT // 100"),
			"",
			"def taxed(lines):",
			"    return [with_tax(c) for c in pricing.priced(lines)]")
	case "pricing":
		return lines(
			`"""Line amounts with the bulk discount."""`,
			"from . import parse",
			"",
			fmt.Sprintf("BULK_QTY = %d  # this many or more", p.bulkQty),
			fmt.Sprintf("BULK_DISCOUNT_PCT = %d", p.bulkPct),
			"",
			"def line_cents(item):",
			`    cents = item["qty"] * item["unit_cents"]`,
			b(`    if item["qty"] >= BULK_QTY:`, `    if item["qty"] > BULK_QTY:`),
			"        cents -= cents * BULK_DISCOUNT_PCT // 100",
			"    return cents",
			"",
			"def priced(lines):",
			"    return [line_cents(i) for i in parse.parse_all(lines)]")
	case "parse":
		return lines(
			`"""Order lines 'sku,qty,price' (price in dollars) to items."""`,
			"from . import units",
			"",
			"def parse_line(line):",
			`    sku, qty, price = [f.strip() for f in line.split(",")]`,
			b(`    return {"sku": sku.upper(), "qty": units.to_each(qty), "unit_cents": round(float(price) * 100)}`,
				`    return {"sku": sku.upper(), "qty": units.to_each(qty), "unit_cents": int(float(price) * 100)}`),
			"",
			"def parse_all(lines):",
			`    return [parse_line(l) for l in lines if l.strip() and not l.startswith("#")]`)
	case "units":
		return lines(
			`"""Quantities: a count, or a count of dozens (dz) or packs (pk)."""`,
			"",
			b(`UNITS = {"dz": 12, "pk": 6}`, `UNITS = {"dz": 10, "pk": 6}`),
			"",
			"def to_each(qty):",
			"    qty = qty.strip()",
			"    for unit, n in UNITS.items():",
			"        if qty.endswith(unit):",
			"            return int(qty[: -len(unit)]) * n",
			"    return int(qty)")
	}
	return ""
}
