package jetstream

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// natsProxy is a TCP proxy to a NATS server that reads the protocol both
// ways, message by message, to play a cluster's faults on one server: a
// request nobody answers (drop: the client's message to that subject is
// withheld) and a reply lost on the way back (loseReply: the request
// reaches the server, which acts on it, and its reply is withheld).
type natsProxy struct {
	ln     net.Listener
	target string
	// drop and loseReply judge each subject a client publishes to; nil:
	// none.
	drop, loseReply func(subject string) bool

	mu    sync.Mutex
	lost  map[string]bool // reply subjects whose reply is withheld
	conns []net.Conn
}

func newNATSProxy(t *testing.T, url string) *natsProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &natsProxy{ln: l, target: strings.TrimPrefix(url, "nats://"), lost: map[string]bool{}}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", p.target)
			if err != nil {
				cc.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cc, sc)
			p.mu.Unlock()
			go func() { p.copy(sc, cc, false); cc.Close(); sc.Close() }()
			go func() { p.copy(cc, sc, true); cc.Close(); sc.Close() }()
		}
	}()
	return p
}

func (p *natsProxy) url() string { return "nats://" + p.ln.Addr().String() }

// cut closes every connection through the proxy (the client reconnects
// through it).
func (p *natsProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// copy forwards one direction: the client's PUB/HPUB (subject [reply]
// sizes) or the server's MSG/HMSG (subject sid [reply] sizes), each
// followed by its payload, the last size being the payload's.
func (p *natsProxy) copy(from io.Reader, to io.Writer, fromClient bool) {
	r := bufio.NewReader(from)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		var payload []byte
		withhold := false
		if len(f) >= 3 && (fromClient && (f[0] == "PUB" || f[0] == "HPUB") || !fromClient && (f[0] == "MSG" || f[0] == "HMSG")) {
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			withhold = p.judge(f, fromClient)
		}
		if withhold {
			continue
		}
		if _, err := io.WriteString(to, line); err != nil {
			return
		}
		if _, err := to.Write(payload); err != nil {
			return
		}
	}
}

func (p *natsProxy) judge(f []string, fromClient bool) bool {
	subject := f[1]
	if !fromClient {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.lost[subject] {
			delete(p.lost, subject)
			return true
		}
		return false
	}
	if p.drop != nil && p.drop(subject) {
		return true
	}
	sizes := 1
	if f[0] == "HPUB" {
		sizes = 2
	}
	if p.loseReply != nil && len(f) == 3+sizes && p.loseReply(subject) {
		p.mu.Lock()
		p.lost[f[2]] = true
		p.mu.Unlock()
	}
	return false
}
