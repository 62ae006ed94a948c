package gen

import (
	"math/rand/v2"
	"testing"
)

// The tax bug's trigger is placed for every parameter the generator draws,
// even where a line's quantity × tax is a multiple of 100 (4 at 25%, a
// dozen at 25%: no price makes its tax round up), which looped forever
// before (worlds gen code --seed 1 --level 2 never ended).
func TestTaxTriggerIsPlacedForEveryParameter(t *testing.T) {
	for bulkQty := 5; bulkQty < 13; bulkQty++ {
		for bulkPct := 5; bulkPct < 21; bulkPct += 3 {
			for taxPct := 5; taxPct < 26; taxPct++ {
				p := codeParams{bulkQty: bulkQty, bulkPct: bulkPct, taxPct: taxPct}
				for seed := range uint64(6) {
					for _, bug := range []string{"tax", ""} {
						ls := codeData(rand.New(rand.NewPCG(seed, 7)), p, 3+int(seed), bug)
						up := 0
						for _, l := range ls {
							if (lineCents(l, p)*p.taxPct)%100 >= 50 {
								up++
							}
						}
						if up == 0 {
							t.Fatalf("%+v seed %d bug %q: no line's tax rounds up: %+v", p, seed, bug, ls)
						}
					}
				}
			}
		}
	}
	// The case that looped: a dozen at 25% tax can never round up.
	p := codeParams{bulkQty: 30, bulkPct: 10, taxPct: 25}
	l := codeLine{qty: "1dz", cents: 1000}
	if taxRoundsUp(&l, p) || l.cents != 1000 {
		t.Fatalf("a dozen at 25%% rounds up: %+v", l)
	}
	ls := []codeLine{{qty: "1dz", cents: 1000}, {qty: "4", cents: 1000}}
	taxTrigger(ls, &ls[0], p)
	if (lineCents(ls[0], p)*p.taxPct)%100 < 50 && (lineCents(ls[1], p)*p.taxPct)%100 < 50 {
		t.Fatalf("the trigger was not placed: %+v", ls)
	}
}
