package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// bashScript writes a scripted policy that runs each command with bash,
// one per turn, then finishes.
func bashScript(t *testing.T, commands ...string) string {
	t.Helper()
	var turns []any
	for _, c := range commands {
		turns = append(turns, map[string]any{"calls": []any{map[string]any{"name": "bash", "args": map[string]any{"command": c, "timeout_s": 60}}}})
	}
	turns = append(turns, map[string]any{"calls": []any{map[string]any{"name": "finish", "args": map[string]any{"summary": "done"}}}})
	b, _ := json.Marshal(map[string]any{"turns": turns})
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sandboxRun runs the commands under the given flags and returns the run
// directory and the bash results in order.
func sandboxRun(t *testing.T, flags []string, commands ...string) (string, []record.ToolResult) {
	t.Helper()
	home := t.TempDir()
	args := append([]string{"run", "--home", home, "--provider", "scripted", "--quiet", "--json", "--script", bashScript(t, commands...)}, flags...)
	code, out, errOut := cli(t, append(args, "probe the sandbox")...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", flags, code, out, errOut)
	}
	dir := onlyRun(t, home)
	var res []record.ToolResult
	for _, r := range decodeAll[record.ToolResult](t, runtest.Events(t, dir), record.TypeToolResult) {
		if r.Name == "bash" {
			res = append(res, r)
		}
	}
	if len(res) != len(commands) {
		t.Fatalf("%d bash results for %d commands", len(res), len(commands))
	}
	return dir, res
}

// Issue 11's checks from outside, under each sandbox: limits come back as
// observations naming the flag, setuid bits do not survive, the run
// directory is private, and the record names the uid and the mechanism.
func TestSandboxHardeningE2E(t *testing.T) {
	runtest.NeedSandbox(t)
	kinds := []string{"native"}
	if _, err := exec.LookPath("bwrap"); err == nil {
		kinds = append(kinds, "bwrap")
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			flags := []string{"--sandbox", kind, "--pids-limit", "64", "--mem-limit", "256MiB", "--tmp-size", "16MiB", "--scratch-quota", "1MiB"}
			cmds := []string{
				"for i in $(seq 200); do sleep 30 & done; echo forked-all",
				`python3 -c "b = b'x' * (512 << 20); print('allocated')"`,
				"dd if=/dev/zero of=/tmp/big bs=1M count=64",
				"head -c 5242880 /dev/zero > /outputs/scratch/big; echo rc=$?",
				"cp /bin/sh /workspace/py && chmod 6755 /workspace/py && ls -l /workspace/py",
			}
			dir, res := sandboxRun(t, flags, cmds...)
			for i, want := range []string{"--pids-limit", "--mem-limit", "--tmp-size", "--scratch-quota"} {
				if !strings.Contains(res[i].Output, "limit: ") || !strings.Contains(res[i].Output, want) {
					t.Errorf("%q: the observation does not name %s:\n%s", cmds[i], want, res[i].Output)
				}
			}
			if !strings.Contains(res[3].Output, "rc=1") || !strings.Contains(res[3].Output, "refused") {
				t.Errorf("5 MiB under --scratch-quota 1MiB was not refused:\n%s", res[3].Output)
			}
			if fi, err := os.Stat(filepath.Join(dir, "outputs", "scratch", "big")); err != nil || fi.Size() > 1<<20 {
				t.Errorf("scratch/big on the host: %v, %v (want at most 1 MiB)", fi, err)
			}
			if strings.Contains(res[1].Output, "allocated") {
				t.Errorf("512 MiB allocated under --mem-limit 256MiB:\n%s", res[1].Output)
			}
			if !strings.Contains(res[4].Output, "rws") {
				t.Fatalf("chmod 6755 did not run:\n%s", res[4].Output)
			}
			_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s keeps %v", p, fi.Mode())
				}
				return nil
			})
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("run directory mode %v, %v", fi.Mode(), err)
			}
			rs := decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]
			if rs.Sandbox.Kind != kind || (os.Geteuid() == 0 && rs.Sandbox.UID == 0) || rs.Sandbox.Mechanism == "" || rs.Sandbox.MemLimit != 256<<20 || rs.Sandbox.PidsLimit != 64 || rs.Sandbox.TmpSize != 16<<20 {
				t.Errorf("sandbox settings %+v", rs.Sandbox)
			}
		})
	}
}

// --network gives the sandbox an outside interface but not the host's
// loopback; --network host shares the host's network.
func TestNetworkModesE2E(t *testing.T) {
	runtest.NeedSandbox(t)
	if _, err := exec.LookPath("pasta"); err != nil {
		t.Skip("pasta not installed (apt-get install -y passt)")
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello from host")) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	probe := `bash -c 'exec 3<>/dev/tcp/127.0.0.1/` + port + ` && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3'; echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)`
	for _, kind := range []string{"native", "bwrap"} {
		if _, err := exec.LookPath("bwrap"); err != nil && kind == "bwrap" {
			continue
		}
		t.Run(kind, func(t *testing.T) {
			dir, res := sandboxRun(t, []string{"--sandbox", kind, "--network"}, probe)
			if out := res[0].Output; strings.Contains(out, "hello from host") || !strings.Contains(out, "interfaces: lo ") {
				t.Errorf("--network: host loopback reached or no outside interface:\n%s", out)
			}
			if rs := decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]; rs.Sandbox.NetworkMode != "outbound" {
				t.Errorf("network mode %q", rs.Sandbox.NetworkMode)
			}
			dir, res = sandboxRun(t, []string{"--sandbox", kind, "--network", "host"}, probe)
			if out := res[0].Output; !strings.Contains(out, "hello from host") {
				t.Errorf("--network host: host server not reached:\n%s", out)
			}
			if rs := decodeAll[record.RunStarted](t, runtest.Events(t, dir), record.TypeRunStarted)[0]; rs.Sandbox.NetworkMode != "host" {
				t.Errorf("network mode %q", rs.Sandbox.NetworkMode)
			}
		})
	}
}
