package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/sandbox"
)

// F10 (issue 25): --network refuses private and link-local ranges to every
// process of the sandbox; --network-allow lets chosen prefixes through.
// The flag is in --help, recorded in run_started's settings, refused
// without --network and for a malformed prefix, and the rules a command
// reads back inside the sandbox (ip rule show) let the allowed prefixes
// jump past the prohibiting ones, which stay for the rest of 10/8. No
// packet is sent.
func TestNetworkAllowE2E(t *testing.T) {
	code, out, _ := cli(t, "run", "--help")
	if code != 0 || !strings.Contains(out, "--network-allow") {
		t.Errorf("run --help (exit %d) does not list --network-allow:\n%s", code, out)
	}
	for _, args := range [][]string{
		{"--network-allow", "10.1.2.0/24"},
		{"--network", "host", "--network-allow", "10.1.2.0/24"},
		{"--network", "--network-allow", "10.1.2.3/24"},
		{"--network", "--network-allow", "ten"},
	} {
		code, out, errOut := cli(t, append(append([]string{"run", "--home", t.TempDir(), "--provider", "scripted", "--quiet"}, args...), "x")...)
		if code == 0 || !strings.Contains(errOut, "--network-allow") {
			t.Errorf("%v: exit %d, want refused naming --network-allow:\n%s%s", args, code, out, errOut)
		}
	}

	runtest.NeedSandbox(t)
	if _, err := exec.LookPath("pasta"); err != nil {
		t.Skip("pasta not installed (apt-get install -y passt)")
	}
	kinds := []string{"native"}
	if _, err := exec.LookPath("bwrap"); err == nil {
		kinds = append(kinds, "bwrap")
	}
	allowed := regexp.MustCompile(`(?m)^(\d+):\s+from all to 10\.1\.2\.0/24 [^\n]*goto (\d+)`)
	blocked := regexp.MustCompile(`(?m)^(\d+):\s+from all to 10\.0\.0\.0/8 [^\n]*prohibit`)
	allowed6 := regexp.MustCompile(`(?m)^(\d+):\s+from all to fd00:1::/64 [^\n]*goto`)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dir, res := sandboxRun(t, []string{"--sandbox", kind, "--network", "--network-allow", "10.1.2.0/24", "--network-allow", "fd00:1::/64"},
				"ip rule show; ip -6 rule show")
			rules := res[0].Output
			a, b := allowed.FindStringSubmatch(rules), blocked.FindStringSubmatch(rules)
			if a == nil || b == nil || allowed6.FindString(rules) == "" {
				t.Fatalf("the rules do not let 10.1.2.0/24 and fd00:1::/64 past the prohibited 10/8:\n%s", rules)
			}
			if len(a[1]) > len(b[1]) || len(a[1]) == len(b[1]) && a[1] >= b[1] {
				t.Errorf("the allow rule (%s) is not looked up before the block (%s):\n%s", a[1], b[1], rules)
			}
			rs := decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]
			if rs.Settings == nil || !slices.Equal(rs.Settings.NetworkAllow, []string{"10.1.2.0/24", "fd00:1::/64"}) {
				t.Errorf("recorded network_allow: %+v", rs.Settings)
			}
			// F5: the record says how the limits held, and show prints it.
			if !strings.Contains(rs.Sandbox.Mechanism, "pidns ipcns") {
				t.Errorf("limits_mechanism %q does not name the per-command namespaces", rs.Sandbox.Mechanism)
			}
			home := filepath.Dir(filepath.Dir(dir))
			code, out, errOut := cli(t, "show", "--home", home, filepath.Base(dir))
			if code != 0 || !strings.Contains(out, "limits:      "+rs.Sandbox.Mechanism+"\n") {
				t.Errorf("show (exit %d) does not print the limits mechanism %q:\n%s%s", code, rs.Sandbox.Mechanism, out, errOut)
			}
		})
	}
}

// F6 (issue 25): the workspace quota is a hard bound, one command adding
// at most --workspace-share: a command writing past its share gets "No
// space left on device" and a limit line that says so, the next command
// has the share again, and the record says workspace=overlay; with
// --workspace-share off the quota is measured and the record says so.
func TestWorkspaceShareE2E(t *testing.T) {
	runtest.NeedSandbox(t)
	write := "head -c 3145728 /dev/zero > /workspace/a; echo rc=$?"
	dir, res := sandboxRun(t, []string{"--workspace-share", "1MiB"}, write, "head -c 524288 /dev/zero > /workspace/b; echo rc=$?")
	if out := res[0].Output; !strings.Contains(out, "rc=1") || !strings.Contains(out, "No space left") || !strings.Contains(out, "from one command") {
		t.Errorf("3 MiB under a 1 MiB share:\n%s", out)
	}
	if out := res[1].Output; !strings.Contains(out, "rc=0") || strings.Contains(out, "limit:") {
		t.Errorf("the next command's 512 KiB:\n%s", out)
	}
	rs := decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]
	if !strings.Contains(rs.Sandbox.Mechanism, "workspace=overlay") || rs.Settings.Limits.WorkspaceShare != 1<<20 {
		t.Errorf("mechanism %q, share %d", rs.Sandbox.Mechanism, rs.Settings.Limits.WorkspaceShare)
	}
	// A quota asked for is hard without --workspace-share: 3 MiB do not
	// fit in 2 MiB, what fit stays, and the record says so.
	dir, res = sandboxRun(t, []string{"--workspace-quota", "2MiB"}, write)
	if out := res[0].Output; !strings.Contains(out, "rc=1") || !strings.Contains(out, "No space left") || !strings.Contains(out, "--workspace-quota") {
		t.Errorf("3 MiB under a 2 MiB quota:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(dir, "workspace", "a")); err != nil || st.Size() > 2<<20 || st.Size() == 0 {
		t.Errorf("what fit of a under the 2 MiB quota: %v %v", st, err)
	}
	rs = decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]
	if !strings.Contains(rs.Sandbox.Mechanism, "workspace=overlay") || rs.Settings.Limits.WorkspaceShare != sandbox.DefaultWorkspaceShare {
		t.Errorf("asked quota: mechanism %q, share %d", rs.Sandbox.Mechanism, rs.Settings.Limits.WorkspaceShare)
	}
	dir, res = sandboxRun(t, []string{"--workspace-share", "off"}, write)
	if out := res[0].Output; !strings.Contains(out, "rc=0") {
		t.Errorf("3 MiB, measured under a 10 GiB quota:\n%s", out)
	}
	rs = decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]
	if !strings.Contains(rs.Sandbox.Mechanism, "workspace=measured") || rs.Settings.Limits.WorkspaceShare != -1 {
		t.Errorf("off: mechanism %q, share %d", rs.Sandbox.Mechanism, rs.Settings.Limits.WorkspaceShare)
	}
	if code, _, errOut := cli(t, "run", "--home", t.TempDir(), "--provider", "scripted", "--workspace-share", "-5", "x"); code == 0 || !strings.Contains(errOut, "--workspace-share") {
		t.Errorf("--workspace-share -5: exit %d %s", code, errOut)
	}
}
