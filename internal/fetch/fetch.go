// Package fetch retrieves a web page for the evidence plane (SPEC
// R-SEARCH-1) under a guard: only http and https, only public addresses
// unless private ones are allowed, bounded size and time.
//
// Guarantees:
//   - the address is checked when the connection is made (after name
//     resolution, so a name that resolves to a private address is refused
//     too), for the first request and for every redirect; loopback,
//     private, link-local, CGNAT, multicast and unspecified addresses are
//     refused unless Guard.AllowPrivate;
//   - at most MaxBytes of a body are read (the rest is dropped and the
//     page says it was cut) and the whole fetch ends within Timeout, so a
//     server that sends gigabytes or never ends costs at most that;
//   - HTML becomes its readable text; other text types are kept as text;
//     a binary body is refused;
//   - at most MaxRedirects redirects are followed, each to http(s) only.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/readable"
)

// Defaults of Guard.
const (
	DefaultMaxBytes = 4 << 20
	DefaultTimeout  = 20 * time.Second
	MaxRedirects    = 5
)

// ErrRefused: the address is not allowed.
var ErrRefused = errors.New("fetch: address refused")

// Guard is what a fetch may reach.
type Guard struct {
	AllowPrivate bool
	MaxBytes     int64         // 0: DefaultMaxBytes
	Timeout      time.Duration // 0: DefaultTimeout
	// refuse, if set, replaces Private (tests: a loopback server that is
	// allowed, and a loopback address that is not).
	refuse func(netip.Addr) bool
}

// Page is a fetched page.
type Page struct {
	URL         string // after redirects
	Title       string
	Text        string
	ContentType string
	Truncated   bool // the body was longer than MaxBytes
}

// Get fetches rawURL.
func (g Guard) Get(ctx context.Context, rawURL string) (Page, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Page{}, fmt.Errorf("fetch: %q is not an http(s) URL", rawURL)
	}
	if err := g.checkHost(u.Hostname()); err != nil {
		return Page{}, err
	}
	max, timeout := g.MaxBytes, g.Timeout
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dialer := &net.Dialer{Timeout: timeout, Control: g.control}
	client := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, ResponseHeaderTimeout: timeout, MaxResponseHeaderBytes: 1 << 20},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("fetch: more than %d redirects", MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("fetch: a redirect to %s, which is not http(s), refused", req.URL)
			}
			if err := g.checkHost(req.URL.Hostname()); err != nil {
				return fmt.Errorf("a redirect to %s: %w", req.URL, err)
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, fmt.Errorf("fetch: %w", err)
	}
	req.Header.Set("User-Agent", "apodex-fetch/0.1")
	req.Header.Set("Accept", "text/html, text/plain, application/json, text/csv, text/markdown;q=0.9, */*;q=0.1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return Page{}, unwrapRefused(err)
		}
		if ctx.Err() != nil {
			return Page{}, fmt.Errorf("fetch: %s did not answer within %s", u.Redacted(), timeout)
		}
		return Page{}, fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return Page{}, fmt.Errorf("fetch: %s answered %s", resp.Request.URL.Redacted(), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	p := Page{URL: resp.Request.URL.String(), ContentType: resp.Header.Get("Content-Type")}
	switch {
	case err != nil && ctx.Err() != nil:
		p.Truncated = true // the time ran out: keep what came
	case err != nil:
		return Page{}, fmt.Errorf("fetch: reading %s: %w", p.URL, err)
	}
	if int64(len(data)) > max {
		data, p.Truncated = data[:max], true
	}
	mt, _, _ := mime.ParseMediaType(p.ContentType)
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml" || (mt == "" && looksHTML(data)):
		rp := readable.Text(data, resp.Request.URL)
		p.Title, p.Text = rp.Title, rp.Text
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "" || strings.HasSuffix(mt, "+json") || mt == "application/xml":
		if strings.IndexByte(string(data[:min(len(data), 8000)]), 0) >= 0 {
			return Page{}, fmt.Errorf("fetch: %s is binary (%s); fetch reads text and HTML only", p.URL, p.ContentType)
		}
		if !utf8.Valid(data) {
			data = []byte(strings.ToValidUTF8(string(data), "\uFFFD"))
		}
		p.Text = strings.ReplaceAll(string(data), "\r\n", "\n")
	default:
		return Page{}, fmt.Errorf("fetch: %s is %s, not text; fetch reads text and HTML only", p.URL, mt)
	}
	return p, nil
}

func looksHTML(data []byte) bool {
	head := strings.ToLower(string(data[:min(len(data), 512)]))
	return strings.Contains(head, "<html") || strings.Contains(head, "<!doctype html")
}

func unwrapRefused(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), ErrRefused.Error()) {
			return e
		}
	}
	return err
}

// checkHost refuses a literal address that is not allowed (a name is
// checked when it is dialed).
func (g Guard) checkHost(host string) error {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !g.AllowPrivate {
			return fmt.Errorf("%w: %s is loopback; private and loopback addresses need --fetch-private", ErrRefused, host)
		}
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return g.checkAddr(a)
	}
	return nil
}

// control runs for every connection, with the resolved address.
func (g Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot tell the address of %s", ErrRefused, address)
	}
	return g.checkAddr(ap.Addr())
}

func (g Guard) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	refuse := Private
	if g.refuse != nil {
		refuse = g.refuse
	} else if g.AllowPrivate {
		return nil
	}
	if refuse(a) {
		return fmt.Errorf("%w: %s is a private, loopback or otherwise non-public address; pass --fetch-private to allow it", ErrRefused, a)
	}
	return nil
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Private reports whether a is not a public unicast address.
func Private(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || cgnat.Contains(a) ||
		(a.Is4() && a.As4()[0] == 0) || a == netip.MustParseAddr("255.255.255.255")
}
