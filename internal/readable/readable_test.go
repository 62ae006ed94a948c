package readable

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct {
		name, html, title string
		want, not         []string
	}{
		{"article", `<html><head><title>Tides</title><style>p{}</style></head><body><nav>Home</nav><article><p>The spring tide rises 4.2 metres above the low-water mark at the harbour wall, twice a day.</p></article></body></html>`,
			"Tides", []string{"rises 4.2 metres"}, []string{"p{}", "<p>"}},
		{"fragment", `<b>just</b> a <i>fragment</i><script>evil()</script>`, "", []string{"just a fragment"}, []string{"evil"}},
		{"invalid UTF-8", "<p>caf\xe9</p>", "", []string{"caf\uFFFD"}, nil},
		{"empty", ``, "", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Text([]byte(c.html), nil)
			if p.Title != c.title {
				t.Errorf("title %q, want %q", p.Title, c.title)
			}
			for _, w := range c.want {
				if !strings.Contains(p.Text, w) {
					t.Errorf("text %q lacks %q", p.Text, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(p.Text, n) {
					t.Errorf("text %q has %q", p.Text, n)
				}
			}
		})
	}
}

func FuzzText(f *testing.F) {
	f.Add("<html><body><p>x</p></body></html>")
	f.Add("<<<>>>\x00")
	f.Fuzz(func(t *testing.T, s string) { Text([]byte(s), nil) })
}
