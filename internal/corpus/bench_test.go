package corpus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/procmem"
)

// vocabulary makes synthetic documents with a Zipf-like word spread.
func vocabulary(n int) []string {
	syll := []string{"ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "pa", "ru", "fe", "xo", "li", "an", "or"}
	words := make([]string, n)
	for i := range words {
		var b strings.Builder
		for x := i + 1; x > 0; x /= len(syll) {
			b.WriteString(syll[x%len(syll)])
		}
		words[i] = b.String()
	}
	return words
}

// makeCorpus writes docs documents of about size bytes each under dir.
func makeCorpus(tb testing.TB, dir string, docs, size int) []string {
	tb.Helper()
	words := vocabulary(20000)
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(words)-1))
	for i := range docs {
		var b strings.Builder
		fmt.Fprintf(&b, "# Document %d\n\n", i)
		line := 0
		for b.Len() < size {
			b.WriteString(words[zipf.Uint64()])
			line++
			if line%12 == 0 {
				b.WriteString(".\n")
				if r.IntN(4) == 0 {
					b.WriteString("\n")
				}
			} else {
				b.WriteByte(' ')
			}
		}
		p := filepath.Join(dir, "d"+strconv.Itoa(i%50), fmt.Sprintf("doc%05d.md", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return words
}

// BenchmarkCorpus10k: index 10,000 documents (about 20 MB), then 1,000
// queries (two-word, one-word and phrase), then reopen the cached index.
// Run with -benchtime 1x.
func BenchmarkCorpus10k(b *testing.B) {
	for range b.N {
		dir, cache := b.TempDir(), b.TempDir()
		words := makeCorpus(b, dir, 10_000, 2000)
		start := time.Now()
		ix, err := Open(context.Background(), dir, cache)
		if err != nil {
			b.Fatal(err)
		}
		build := time.Since(start)
		b.ReportMetric(build.Seconds(), "index-s")
		b.ReportMetric(procmem.PeakRSS(), "peak-RSS-MiB")
		r := rand.New(rand.NewPCG(3, 4))
		lat := make([]time.Duration, 0, 1000)
		for i := range 1000 {
			q := words[r.IntN(2000)] + " " + words[r.IntN(2000)]
			switch i % 3 {
			case 1:
				q = words[r.IntN(500)]
			case 2:
				q = `"` + q + `"`
			}
			t0 := time.Now()
			if _, _, err := ix.Search(context.Background(), q, 8); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "search-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "search-p99-ms")
		ix.Close()
		start = time.Now()
		again, err := Open(context.Background(), dir, cache)
		if err != nil {
			b.Fatal(err)
		}
		if again.Info.State != Reused {
			b.Fatalf("not reused: %+v", again.Info)
		}
		b.ReportMetric(time.Since(start).Seconds(), "reuse-s")
		b.ReportMetric(float64(again.Info.Passages), "passages")
		again.Close()
	}
}
