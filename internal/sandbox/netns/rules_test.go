package netns_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/sandbox/netns"
	"github.com/apodex/apodex/internal/sandbox/sandboxtest"
)

// ruleLine is a rule as `ip rule show` prints it.
var ruleLine = regexp.MustCompile(`^(\d+):\s+from all (?:to (\S+) )?(?:iif lo )?(?:ipproto (\S+) )?(?:dport (\d+) )?(prohibit|goto \d+|lookup local)`)

// TestOutboundRules is F10 (issue 25): with --network, bash reached the
// link-local and private addresses fetch refuses. Every outbound sandbox
// now has rules that refuse them, read back here from inside the sandbox
// (ip rule show); that they refuse is shown by a loopback alias, which
// this test (only) adds to the blocked prefixes: a connect to it fails
// with "Permission denied" before any packet is sent, while another
// loopback address, and an allowed one inside a blocked prefix, are
// reached (nothing listens: "Connection refused"). No packet leaves the
// loopback. It is F9 too: pasta runs as the sandbox uid, never root.
func TestOutboundRules(t *testing.T) {
	sandboxtest.NeedOutbound(t)
	netns.BlockAlso(t, netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("127.0.0.4/30"))
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}
	cmd := `if command -v ip >/dev/null; then ip rule show; ip -6 rule show; else echo "no ip"; fi
for h in 127.0.0.1 127.0.0.2 127.0.0.5 127.0.0.6; do echo "try $h: $(bash -c "exec 3<>/dev/tcp/$h/9" 2>&1)"; done
sleep 0.3`
	for name, r := range sandboxtest.Sandboxes(t) {
		t.Run(name, func(t *testing.T) {
			seen := watchPasta(t)
			res := sandboxtest.Run(t, r, sandbox.Spec{Outbound: true, AllowNets: allow, Command: cmd})
			out := string(res.Stdout)
			for h, want := range map[string]string{"127.0.0.1": "Connection refused", "127.0.0.2": "Permission denied",
				"127.0.0.5": "Connection refused", "127.0.0.6": "Permission denied"} {
				if line := lineWith(out, "try "+h+":"); !strings.Contains(line, want) {
					t.Errorf("connect to %s: %q, want %q", h, line, want)
				}
			}
			if strings.Contains(out, "no ip") {
				t.Log("no ip command in the sandbox: the rules were not read back")
			} else {
				checkRules(t, out, netns.Resolvers(filepath.Join("/etc", "resolv.conf")))
			}
			uids := seen()
			if len(uids) == 0 {
				t.Errorf("no pasta seen while the command ran")
			}
			for _, uid := range uids {
				if uid == 0 {
					t.Errorf("pasta ran as root")
				}
			}
		})
	}
}

// checkRules reads `ip rule show` and `ip -6 rule show`: every blocked
// prefix is prohibited for the sandbox's own packets, before the local
// table, which is no longer looked up first; the allowed address and the
// resolvers' port 53 jump past them.
func checkRules(t *testing.T, out string, dns []netip.Addr) {
	t.Helper()
	prohibited := map[netip.Prefix]bool{}
	gotos := map[string]bool{}
	localAt := map[int]bool{}
	for _, line := range strings.Split(out, "\n") {
		m := ruleLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		pref, _ := strconv.Atoi(m[1])
		switch {
		case m[5] == "lookup local":
			localAt[pref] = true
		case m[5] == "prohibit":
			p, err := netip.ParsePrefix(m[2])
			if err != nil {
				a, aerr := netip.ParseAddr(m[2])
				if aerr != nil {
					t.Errorf("rule %q: %v", line, err)
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if pref != netns.PrefBlock {
				t.Errorf("rule %q is not at %d", line, netns.PrefBlock)
			}
			prohibited[p] = true
		default:
			gotos[m[2]+" "+m[3]+" "+m[4]] = true
		}
	}
	for _, p := range netns.Blocked() {
		if !prohibited[p] {
			t.Errorf("no rule prohibits %s:\n%s", p, out)
		}
	}
	if localAt[0] || !localAt[netns.PrefLocal] {
		t.Errorf("the local table is looked up at %v, want only at %d:\n%s", localAt, netns.PrefLocal, out)
	}
	if !gotos["127.0.0.5  "] {
		t.Errorf("no rule lets 127.0.0.5 through:\n%s", out)
	}
	for _, a := range dns {
		if !gotos[a.String()+" udp 53"] || !gotos[a.String()+" tcp 53"] {
			t.Errorf("no rule lets the resolver %s's port 53 through:\n%s", a, out)
		}
	}
}

// watchPasta records the uid of every pasta this process starts until the
// returned function is called, which returns them.
func watchPasta(t *testing.T) func() []int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	uids := map[int]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				pid, err := strconv.Atoi(e.Name())
				if err != nil {
					continue
				}
				// pasta is passt (or passt.avx2) by another name.
				exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				if !strings.HasPrefix(filepath.Base(exe), "passt") || lineWith(string(st), "PPid:") != fmt.Sprintf("PPid:\t%d", os.Getpid()) {
					continue
				}
				if f := strings.Fields(lineWith(string(st), "Uid:")); len(f) > 2 {
					uid, _ := strconv.Atoi(f[2]) // effective
					mu.Lock()
					uids[pid] = uid
					mu.Unlock()
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() []int {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		var out []int
		for _, uid := range uids {
			out = append(out, uid)
		}
		return out
	}
}

// lineWith is the first line of s that starts with prefix ("" none).
func lineWith(s, prefix string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
