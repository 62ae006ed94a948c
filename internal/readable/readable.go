// Package readable turns an HTML page into its readable text (the article,
// without navigation, scripts and styles), the one place the readability
// library is used.
//
// Guarantees:
//   - Text never fails on bad HTML: when no article is found it falls back
//     to the page's visible text, and the result is valid UTF-8 with runs
//     of blank lines folded to one and lines trimmed.
package readable

import (
	"bytes"
	"net/url"
	"strings"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html"
)

// Page is a page's title and readable text.
type Page struct {
	Title string
	Text  string
}

// Text extracts the readable text of the HTML in data; base (may be nil)
// is the page's address.
func Text(data []byte, base *url.URL) Page {
	data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	var p Page
	if art, err := readability.FromReader(bytes.NewReader(data), base); err == nil && art.Node != nil {
		var b strings.Builder
		if art.RenderText(&b) == nil {
			p.Title, p.Text = strings.TrimSpace(art.Title()), tidy(b.String())
		}
	}
	if strings.TrimSpace(p.Text) == "" {
		title, text := visible(data)
		if p.Title == "" {
			p.Title = title
		}
		p.Text = tidy(text)
	}
	return p
}

// visible is the text of every node outside script, style and head, and
// the document's title.
func visible(data []byte) (title, text string) {
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return "", string(data)
	}
	var b strings.Builder
	var walk func(n *html.Node, skip bool)
	walk = func(n *html.Node, skip bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "noscript", "template":
				return
			case "title":
				if n.FirstChild != nil && title == "" {
					title = strings.TrimSpace(n.FirstChild.Data)
				}
				return
			case "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "table":
				b.WriteString("\n")
			}
		}
		if n.Type == html.TextNode && !skip {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, skip)
		}
	}
	walk(doc, false)
	return title, b.String()
}

// tidy trims lines, folds runs of blank lines and spaces.
func tidy(s string) string {
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
