package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const page = `<!doctype html><html><head><title>Tides</title><script>var x = "script text";</script></head>
<body><nav>Home | About</nav><article><h1>Tides</h1>
<p>The spring tide at Kestrel Bay rises 4.2 metres above the low-water mark, twice a day, every day of the year.</p>
<p>Neap tides rise about half as far, and the bay's shape makes the flood run faster than the ebb.</p>
</article></body></html>`

func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "line one\r\nline two\n")
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 3})
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) { // 2 GB, streamed
		w.Header().Set("Content-Type", "text/plain")
		chunk := []byte(strings.Repeat("x", 1<<16) + "\n")
		for i := 0; i < (2<<30)/len(chunk); i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/forever", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for {
			if _, err := fmt.Fprintln(w, "still going"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/to-loopback", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:9/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-localhost", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:9/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/to-page", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page", http.StatusFound)
	})
	// The server listens on 127.0.0.2, so that a redirect to 127.0.0.1 can
	// be told apart from the server itself.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	s := httptest.NewUnstartedServer(mux)
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// onlyServer allows 127.0.0.2 (the test server, standing in for a public
// one) and refuses every other non-public address.
func onlyServer(a netip.Addr) bool { return a != netip.MustParseAddr("127.0.0.2") && Private(a) }

func TestLoopbackRefusedUnlessAllowed(t *testing.T) {
	s := server(t)
	_, err := Guard{}.Get(context.Background(), s.URL+"/page")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--fetch-private") {
		t.Fatalf("loopback fetch: err %v, want refused naming --fetch-private", err)
	}
	for _, u := range []string{"http://localhost:1/", "http://[::1]:1/", "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]:1/"} {
		if _, err := (Guard{}).Get(context.Background(), u); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: err %v, want refused", u, err)
		}
	}
	p, err := Guard{AllowPrivate: true}.Get(context.Background(), s.URL+"/page")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Text, "rises 4.2 metres above the low-water mark") || strings.Contains(p.Text, "script text") {
		t.Fatalf("readable text wrong:\n%s", p.Text)
	}
	if p.Title != "Tides" {
		t.Errorf("title %q", p.Title)
	}
}

func TestRedirects(t *testing.T) {
	s := server(t)
	g := Guard{refuse: onlyServer}
	if _, err := g.Get(context.Background(), s.URL+"/to-loopback"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("redirect to 127.0.0.1: err %v, want refused naming it", err)
	}
	if _, err := g.Get(context.Background(), s.URL+"/to-localhost"); !errors.Is(err, ErrRefused) {
		t.Fatalf("redirect to localhost: err %v, want refused", err)
	}
	if _, err := g.Get(context.Background(), s.URL+"/to-file"); err == nil || !strings.Contains(err.Error(), "not http(s)") {
		t.Fatalf("redirect to file://: err %v", err)
	}
	p, err := g.Get(context.Background(), s.URL+"/to-page")
	if err != nil || !strings.HasSuffix(p.URL, "/page") || !strings.Contains(p.Text, "Neap tides") {
		t.Fatalf("allowed redirect: %+v %v", p, err)
	}
}

func TestCaps(t *testing.T) {
	s := server(t)
	g := Guard{AllowPrivate: true, MaxBytes: 1 << 20, Timeout: 2 * time.Second}
	p, err := g.Get(context.Background(), s.URL+"/huge")
	if err != nil || !p.Truncated || len(p.Text) != 1<<20 {
		t.Fatalf("2 GB body: truncated %v, %d bytes, err %v; want the first MiB, cut", p.Truncated, len(p.Text), err)
	}
	g.Timeout = 300 * time.Millisecond
	p, err = g.Get(context.Background(), s.URL+"/forever")
	if err != nil || !p.Truncated || !strings.HasPrefix(p.Text, "still going") {
		t.Fatalf("never-ending body: %v %q %v", p.Truncated, p.Text[:min(len(p.Text), 40)], err)
	}
	if _, err := g.Get(context.Background(), s.URL+"/binary"); err == nil || !strings.Contains(err.Error(), "not text") {
		t.Fatalf("binary: %v", err)
	}
	p, err = g.Get(context.Background(), s.URL+"/plain")
	if err != nil || p.Text != "line one\nline two\n" {
		t.Fatalf("plain: %q %v", p.Text, err)
	}
	for _, u := range []string{"ftp://example.com/x", "file:///etc/passwd", "not a url", "http://"} {
		if _, err := g.Get(context.Background(), u); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
			t.Errorf("%q: %v", u, err)
		}
	}
}
