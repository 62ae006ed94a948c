package netns

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The rules of an outbound network (Spec.Outbound): policy-routing rules
// in the sandbox's network namespace refuse every locally generated packet
// to a blocked prefix (the private, link-local, shared and multicast
// ranges that fetch refuses, by default) with EACCES before it is sent, so
// no process of the sandbox reaches the host's LAN or a cloud metadata
// service. An allowed prefix (Spec.AllowNets) and port 53 of the
// resolvers in the sandbox's /etc/resolv.conf are let through. The rules
// match packets of the namespace's own processes only (iif lo): replies
// coming in are untouched. The table of local addresses is looked up after
// them, so a blocked prefix holding a local address is refused too (the
// sandbox's own loopback, 127.0.0.0/8 and ::1, is never blocked by
// default). The process that creates the namespace installs them before
// any command runs; the commands hold no capability to change them.

// Rules are the rules of one outbound network namespace.
type Rules struct {
	Block []netip.Prefix `json:"block"`
	Allow []netip.Prefix `json:"allow,omitempty"`
	// DNS are resolvers whose port 53 (TCP and UDP) stays reachable.
	DNS []netip.Addr `json:"dns,omitempty"`
}

// blockedNets are the prefixes an outbound command cannot reach: what
// fetch refuses (fetch.Private) but the sandbox's own loopback.
var blockedNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// Priorities of the rules: allowed prefixes jump past the blocked ones to
// the local table's lookup, which moves from 0 to prefLocal.
const (
	prefAllow = 1000
	prefBlock = 1500
	prefLocal = 2000
)

// OutboundRules are the rules of an outbound sandbox whose /etc is etc.
func OutboundRules(etc string, allow []netip.Prefix) Rules {
	return Rules{Block: append([]netip.Prefix(nil), blockedNets...), Allow: allow, DNS: resolvers(filepath.Join(etc, "resolv.conf"))}
}

// resolvers are the nameservers of a resolv.conf.
func resolvers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Zone() == "" {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}

// Apply installs r in the network namespace of the calling thread, which
// must hold CAP_NET_ADMIN there.
func (r Rules) Apply() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	nl := &netlink{fd: fd}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		is4 := fam == unix.AF_INET
		// The local table after the rules: added at prefLocal before the
		// one at 0 goes, so local addresses are never left without it.
		if err := nl.rule(unix.RTM_NEWRULE, rule{family: fam, table: unix.RT_TABLE_LOCAL, action: unix.FR_ACT_TO_TBL, pref: prefLocal}); err != nil {
			return err
		}
		if err := nl.rule(unix.RTM_DELRULE, rule{family: fam, table: unix.RT_TABLE_LOCAL, action: unix.FR_ACT_TO_TBL, pref: 0}); err != nil {
			return err
		}
		for _, p := range r.Allow {
			if p.Addr().Is4() == is4 {
				if err := nl.rule(unix.RTM_NEWRULE, rule{family: fam, dst: p, action: unix.FR_ACT_GOTO, target: prefLocal, pref: prefAllow}); err != nil {
					return err
				}
			}
		}
		for _, a := range r.DNS {
			if a.Is4() != is4 {
				continue
			}
			for _, proto := range []uint8{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
				if err := nl.rule(unix.RTM_NEWRULE, rule{family: fam, dst: netip.PrefixFrom(a, a.BitLen()), proto: proto, dport: 53, action: unix.FR_ACT_GOTO, target: prefLocal, pref: prefAllow}); err != nil {
					return err
				}
			}
		}
		for _, p := range r.Block {
			if p.Addr().Is4() == is4 {
				if err := nl.rule(unix.RTM_NEWRULE, rule{family: fam, dst: p, action: unix.FR_ACT_PROHIBIT, pref: prefBlock}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rule is one policy-routing rule; every rule but the local table's
// matches the namespace's own packets only (iif lo).
type rule struct {
	family uint8
	dst    netip.Prefix // invalid: any
	proto  uint8        // 0: any
	dport  uint16       // 0: any
	table  uint8
	action uint8
	target uint32 // FR_ACT_GOTO's priority
	pref   uint32
}

// netlink sends rules and waits for each acknowledgement.
type netlink struct {
	fd  int
	seq uint32
}

func (nl *netlink) rule(op uint16, r rule) error {
	nl.seq++
	flags := uint16(unix.NLM_F_REQUEST | unix.NLM_F_ACK)
	if op == unix.RTM_NEWRULE {
		flags |= unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	// struct fib_rule_hdr: family, dst_len, src_len, tos, table, res1,
	// res2, action, flags.
	var dstLen uint8
	if r.dst.IsValid() {
		dstLen = uint8(r.dst.Bits())
	}
	b := []byte{r.family, dstLen, 0, 0, r.table, 0, 0, r.action, 0, 0, 0, 0}
	attr := func(typ uint16, data []byte) {
		n := 4 + len(data)
		b = binary.NativeEndian.AppendUint16(b, uint16(n))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	attr(unix.FRA_PRIORITY, u32(r.pref))
	if r.table == 0 {
		attr(unix.FRA_IIFNAME, []byte("lo\x00"))
	}
	if r.dst.IsValid() {
		attr(unix.FRA_DST, r.dst.Masked().Addr().AsSlice())
	}
	if r.proto != 0 {
		attr(unix.FRA_IP_PROTO, []byte{r.proto})
	}
	if r.dport != 0 {
		attr(unix.FRA_DPORT_RANGE, binary.NativeEndian.AppendUint16(binary.NativeEndian.AppendUint16(nil, r.dport), r.dport))
	}
	if r.action == unix.FR_ACT_GOTO {
		attr(unix.FRA_GOTO, u32(r.target))
	}
	msg := binary.NativeEndian.AppendUint32(nil, uint32(unix.SizeofNlMsghdr+len(b)))
	msg = binary.NativeEndian.AppendUint16(msg, op)
	msg = binary.NativeEndian.AppendUint16(msg, flags)
	msg = binary.NativeEndian.AppendUint32(msg, nl.seq)
	msg = binary.NativeEndian.AppendUint32(msg, 0)
	msg = append(msg, b...)
	if err := unix.Sendto(nl.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(nl.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		// Each message: struct nlmsghdr (length, type, flags, seq,
		// pid), then for NLMSG_ERROR the error code.
		for rest := buf[:n]; len(rest) >= unix.SizeofNlMsghdr; {
			l := int(binary.NativeEndian.Uint32(rest))
			if l < unix.SizeofNlMsghdr || l > len(rest) {
				return errors.New("netlink: a malformed reply")
			}
			typ, seq := binary.NativeEndian.Uint16(rest[4:]), binary.NativeEndian.Uint32(rest[8:])
			if seq == nl.seq && typ == unix.NLMSG_ERROR && l >= unix.SizeofNlMsghdr+4 {
				if code := int32(binary.NativeEndian.Uint32(rest[unix.SizeofNlMsghdr:])); code != 0 {
					return fmt.Errorf("rule %s: %w", r, unix.Errno(-code))
				}
				return nil
			}
			rest = rest[min(len(rest), (l+3)&^3):]
		}
	}
}

func (r rule) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "pref %d", r.pref)
	if r.dst.IsValid() {
		fmt.Fprintf(&s, " to %s", r.dst)
	}
	if r.dport != 0 {
		fmt.Fprintf(&s, " ipproto %d dport %d", r.proto, r.dport)
	}
	fmt.Fprintf(&s, " action %d", r.action)
	return s.String()
}
