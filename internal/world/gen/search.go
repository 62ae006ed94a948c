package gen

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

var (
	syllables = []string{"ka", "lo", "mi", "ra", "ven", "tor", "sel", "dri", "no", "qua", "bel", "zen", "ori", "pax", "ul", "fen"}
	cities    = []string{"Tarsk", "Velmora", "Ostrava Nova", "Kelbridge", "Marran", "Solvik", "Duneholt", "Pellaro", "Quarry Bay", "Ithel", "Brask", "Corvane"}
	givens    = []string{"Ada", "Bruno", "Celia", "Dario", "Elin", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Lev"}
)

// genSearch makes a search world: a corpus where the answer needs a chain
// of documents (product → maker → founder [→ mentor] → birthplace), with
// near-miss distractors and, from level 3, an early profile that a later
// correction overrides.
func genSearch(rng *rand.Rand, s Spec, w *world) (map[string]any, error) {
	L := s.Level
	name := func() string {
		return strings.ToUpper(pick(rng, syllables)[:1]) + pick(rng, syllables)[1:] + pick(rng, syllables) + pick(rng, syllables)
	}
	person := func() string { return pick(rng, givens) + " " + name() }
	product := name() + " " + pick(rng, []string{"X1", "Pro", "Mini", "Atlas", "One"})
	company := name() + " " + pick(rng, []string{"Labs", "Systems", "Works", "Instruments"})
	founder := person()
	mentor := person()
	usedCity := shuffled(rng, cities)
	city, wrongCity := usedCity[0], usedCity[1]
	mentorHop := L >= 4
	correction := L >= 3

	type doc struct{ title, date, body string }
	var docs []doc
	var load []int // indexes of load-bearing docs
	add := func(d doc, bearing bool) {
		docs = append(docs, d)
		if bearing {
			load = append(load, len(docs)-1)
		}
	}
	add(doc{"Product brief: " + product, "2021-03-14", fmt.Sprintf("The %s is a handheld field spectrometer made by %s. It shipped in 2019.", product, company)}, true)
	add(doc{"Company profile: " + company, "2020-07-02", fmt.Sprintf("%s was founded in 2011 by %s, who led it until 2018.", company, founder)}, true)
	subject := founder
	if mentorHop {
		add(doc{"Interview with " + founder, "2022-01-20", fmt.Sprintf("%s credits %s, under whom they trained, with the idea for the company.", founder, mentor)}, true)
		subject = mentor
	}
	first := city
	if correction {
		first = wrongCity
	}
	add(doc{"Biography: " + subject, "2019-05-30", fmt.Sprintf("%s was born in %s and studied physics before turning to instruments.", subject, first)}, !correction)
	if correction {
		add(doc{"Correction: biography of " + subject, "2023-09-12", fmt.Sprintf("Correction: an earlier biography said %s was born in %s. Records show %s was born in %s.", subject, wrongCity, subject, city)}, true)
		load = append(load, len(docs)-2) // the corrected profile is read too
	}
	// Distractors: near-miss names on every hop.
	nd := 2*L + 1
	for i := 0; i < nd; i++ {
		other := person()
		oc := usedCity[2+i%(len(usedCity)-2)]
		switch i % 3 {
		case 0:
			alt := strings.Fields(company)[0] + " " + pick(rng, []string{"Holdings", "Group", "Retail"})
			add(doc{"Company profile: " + alt, "2021-11-0" + fmt.Sprint(1+i%9), fmt.Sprintf("%s, not to be confused with %s, was founded by %s.", alt, company, other)}, false)
		case 1:
			add(doc{"Biography: " + other, "2020-02-1" + fmt.Sprint(i%9), fmt.Sprintf("%s was born in %s.", other, oc)}, false)
		default:
			add(doc{"Product brief: " + strings.Fields(product)[0] + " Lite", "2022-06-2" + fmt.Sprint(i%9), fmt.Sprintf("A cheaper sibling of the %s, made under licence by %s.", product, name()+" Retail")}, false)
		}
	}
	if L >= 5 {
		other := person()
		add(doc{"Correction: biography of " + other, "2024-02-02", fmt.Sprintf("Correction: %s was born in %s, not %s.", other, usedCity[3], usedCity[4])}, false)
	}
	// Shuffle the file names so order gives nothing away.
	perm := rng.Perm(len(docs))
	fileOf := make([]string, len(docs))
	for i, p := range perm {
		fileOf[i] = fmt.Sprintf("doc-%02d.md", p+1)
		d := docs[i]
		w.put("corpus/"+fileOf[i], lines("# "+d.title, "", "Date: "+d.date, "", d.body))
	}
	var need []string
	for _, i := range load {
		need = append(need, fileOf[i])
	}
	sort.Strings(need)
	q := "the founder of the company that makes the " + product
	if mentorHop {
		q = "the person who trained " + strings.TrimPrefix(q, "the ")
	}
	w.put("tests/answer.txt", city+"\n")
	w.put("tests/sources.sh", lines(
		"# Every load-bearing document must be cited in /outputs/sources.txt.",
		"for d in "+strings.Join(need, " ")+"; do",
		`  grep -q "$d" /outputs/sources.txt || { echo "sources.txt does not cite $d"; exit 1; }`,
		"done"))
	w.put("solution/outputs/answer.txt", city+"\n")
	w.put("solution/outputs/sources.txt", strings.Join(need, "\n")+"\n")
	budget := budgetFor(L)
	transitions := len(load)
	diff := pressure(len(docs), transitions, budget)
	return map[string]any{
		"difficulty": diff,
		"objective": fmt.Sprintf("Using only the documents in /inputs/corpus, answer: in which city was %s born? "+
			"Write the city name alone to /outputs/answer.txt, and the file names of the documents your answer rests on, one per line, to /outputs/sources.txt.", q),
		"budget": map[string]any{"turns": budget, "tool_calls": budget},
		"corpus": "corpus",
		"deliverables": []any{
			map[string]any{"path": "/outputs/answer.txt", "non_empty": true},
			map[string]any{"path": "/outputs/sources.txt", "non_empty": true},
		},
		// Once the source_alignment clause lands, the sources check should
		// become one: quoted spans aligned against the cited evidence.
		"verify": []any{
			map[string]any{"kind": "recompute", "name": "answer is the documented city", "command": "cat /tests/answer.txt", "files": "tests", "compare": "/outputs/answer.txt"},
			map[string]any{"kind": "tests", "name": "sources cite every load-bearing document", "command": "sh /tests/sources.sh", "files": "tests"},
		},
	}, nil
}
