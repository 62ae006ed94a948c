package corpus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// badCorpus has one good document and every kind of bad input.
func badCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "good.md", "# Harbour report\n\nThe harbour master counted 212 vessels in 1903.\n")
	write(t, dir, "empty.txt", "")
	write(t, dir, "binary.txt", "abc\x00def")
	write(t, dir, "image.png", "\x89PNG")
	write(t, dir, "paper.pdf", "%PDF-1.4")
	write(t, dir, "latin1.txt", "caf\xe9 au lait near the quay\n")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("the password is hunter2\n"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "escape.txt"))
	os.Symlink("good.md", filepath.Join(dir, "inside-link.md"))
	return dir
}

func TestScanBadInput(t *testing.T) {
	dir := badCorpus(t)
	m, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	if !slices.Equal(paths, []string{"good.md", "latin1.txt"}) {
		t.Fatalf("indexed %v", paths)
	}
	want := map[string]string{
		"binary.txt":     "binary",
		"empty.txt":      "empty",
		"escape.txt":     "a symlink out of the corpus, refused",
		"image.png":      "not indexed",
		"inside-link.md": "not followed",
		"paper.pdf":      "PDF is not indexed",
	}
	if len(m.Skipped) != len(want) {
		t.Fatalf("skipped %v", m.Skipped)
	}
	for _, s := range m.Skipped {
		name, why, _ := strings.Cut(s, ": ")
		if !strings.Contains(why, want[name]) {
			t.Errorf("%s skipped as %q, want %q", name, why, want[name])
		}
	}
	ix, err := Open(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// The refused link's target is never indexed.
	if hits, _, _ := ix.Search(context.Background(), "password hunter2", 5); len(hits) != 0 {
		t.Fatalf("a file outside the corpus was indexed: %+v", hits)
	}
	hits, _, err := ix.Search(context.Background(), "quay", 5)
	if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Text, "caf\uFFFD au lait") {
		t.Fatalf("invalid UTF-8: %+v %v", hits, err)
	}
}

func TestSearchAndReuse(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		write(t, dir, fmt.Sprintf("docs/d%03d.md", i), fmt.Sprintf("# Report %d\n\nThe quarterly figures for region %d were steady.\nNothing unusual was seen.\n", i, i))
	}
	write(t, dir, "docs/needle.md", "# Field notes\n\nIntro line.\n\nThe blue heron nests on the western island every spring.\nIt leaves in September.\n")
	write(t, dir, "budget/plan-2024.txt", "Budget lines for the new dock.\n")
	cache := t.TempDir()
	ix, err := Open(context.Background(), dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Info.State != Built || ix.Info.Docs != 302 {
		t.Fatalf("info %+v", ix.Info)
	}
	hits, total, err := ix.Search(context.Background(), `"blue heron nests"`, 8)
	if err != nil || total != 1 || len(hits) != 1 {
		t.Fatalf("phrase: %d/%d %v", len(hits), total, err)
	}
	h := hits[0]
	if h.Path != "docs/needle.md" || h.From != 5 || h.To != 6 || h.Text != "The blue heron nests on the western island every spring.\nIt leaves in September." || h.Title != "Field notes" {
		t.Fatalf("hit %+v", h)
	}
	// The words in another order are no phrase.
	if hits, _, _ := ix.Search(context.Background(), `"heron blue nests"`, 8); len(hits) != 0 {
		t.Fatalf("phrase out of order matched: %+v", hits)
	}
	if hits, _, _ := ix.Search(context.Background(), "path:budget", 8); len(hits) != 1 || hits[0].Path != "budget/plan-2024.txt" {
		t.Fatalf("path field: %+v", hits)
	}
	if hits, _, _ := ix.Search(context.Background(), "title:field", 8); len(hits) == 0 || hits[0].Path != "docs/needle.md" {
		t.Fatalf("title field: %+v", hits)
	}
	if hits, _, _ := ix.Search(context.Background(), "quarterly figures", 3); len(hits) != 3 {
		t.Fatalf("k not honoured: %d hits", len(hits))
	}
	for _, q := range []string{"", "   ", `""`, "+ - :", "*", "~", "title:", "()"} {
		if _, _, err := ix.Search(context.Background(), q, 8); !errors.Is(err, ErrQuery) {
			t.Errorf("query %q: err %v, want ErrQuery", q, err)
		}
	}
	ix.Close()

	again, err := Open(context.Background(), dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	if again.Info.State != Reused || again.Info.Hash != ix.Info.Hash || again.Info.Docs != 302 {
		t.Fatalf("second open: %+v", again.Info)
	}
	again.Close()
	write(t, dir, "docs/new.md", "A new document.\n")
	changed, err := Open(context.Background(), dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer changed.Close()
	if changed.Info.State != Built || changed.Info.Hash == ix.Info.Hash {
		t.Fatalf("a changed corpus reused the index: %+v", changed.Info)
	}
}

func TestHTMLAndPassages(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "page.html", `<html><head><title>Ferry times</title><style>p{color:red}</style></head><body><nav>menu</nav><article><p>The first ferry leaves the harbour at 06:40 on weekdays and reaches the island at 07:25.</p><p>On Sundays the first ferry leaves at 09:00.</p></article></body></html>`)
	long := strings.Repeat("word ", 1000) // one 5,000-byte line
	write(t, dir, "long.txt", "start\n"+long+"\nend\n")
	ix, err := Open(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	hits, _, err := ix.Search(context.Background(), "ferry weekdays", 3)
	if err != nil || len(hits) == 0 || hits[0].Title != "Ferry times" || strings.Contains(hits[0].Text, "<p>") || !strings.Contains(hits[0].Text, "06:40 on weekdays") {
		t.Fatalf("HTML: %+v %v", hits, err)
	}
	hits, _, _ = ix.Search(context.Background(), "word", 3)
	if len(hits) == 0 || len(hits[0].Text) > maxBytes {
		t.Fatalf("a long line's passage is %d bytes", len(hits[0].Text))
	}
}

func TestOversizedFileSkipped(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB sparse file; run without -short")
	}
	dir := t.TempDir()
	write(t, dir, "small.txt", "a small document about tides\n")
	f, err := os.Create(filepath.Join(dir, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(200 << 20); err != nil { // sparse: no 200 MB on disk or in memory
		t.Skipf("cannot make a sparse 200 MB file here: %v", err)
	}
	f.Close()
	m, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 1 || len(m.Skipped) != 1 || !strings.Contains(m.Skipped[0], "larger than 16 MiB") {
		t.Fatalf("files %v skipped %v", m.Files, m.Skipped)
	}
}

func TestManyFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes 100,000 files; run without -short")
	}
	dir := t.TempDir()
	for i := range 100_000 {
		write(t, dir, fmt.Sprintf("d%02d/f%06d.txt", i%100, i), fmt.Sprintf("record %d of the archive, token%d\n", i, i))
	}
	ix, err := Open(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Info.Docs != 100_000 {
		t.Fatalf("%d docs", ix.Info.Docs)
	}
	hits, _, err := ix.Search(context.Background(), "token99999", 5)
	if err != nil || len(hits) != 1 || hits[0].Path != "d99/f099999.txt" {
		t.Fatalf("%+v %v", hits, err)
	}
}
