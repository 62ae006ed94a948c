package runflags

import (
	"io"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// A workspace quota that is asked for — on the command line or in a task's
// budget — is a hard bound (a per-command share); the built-in ceiling is
// measured; --workspace-share, given, wins either way.
func TestAskedWorkspaceQuotaIsHard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		budget int64
		share  int64
		quota  int64
	}{
		{"nothing asked", nil, 0, spec.DefaultWorkspaceRefuseNear, spec.DefaultWorkspaceBytes},
		{"flag", []string{"--workspace-quota", "50MiB"}, 0, spec.DefaultWorkspaceShare, 50 << 20},
		{"task budget", nil, 20 << 20, spec.DefaultWorkspaceShare, 20 << 20},
		{"flag beats budget", []string{"--workspace-quota", "50MiB"}, 20 << 20, spec.DefaultWorkspaceShare, 50 << 20},
		{"measured on request", []string{"--workspace-quota", "50MiB", "--workspace-share", "off"}, 0, -1, 50 << 20},
		{"share given", []string{"--workspace-quota", "50MiB", "--workspace-share", "8MiB"}, 0, 8 << 20, 50 << 20},
		{"share without quota", []string{"--workspace-share", "8MiB"}, 0, 8 << 20, spec.DefaultWorkspaceBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := cmdline.NewFlagSet("run", "", io.Discard, io.Discard)
			var f Flags
			f.Register(fs)
			if _, err := fs.Parse(append(tc.args, "objective")); err != nil {
				t.Fatal(err)
			}
			if tc.budget > 0 {
				f.ApplyContract(fs.Given(), &contract.Contract{Budget: contract.Budget{WorkspaceQuota: tc.budget}})
			}
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
			l := f.Settings.Limits
			if l.WorkspaceShare != tc.share || l.WorkspaceQuota != tc.quota {
				t.Errorf("quota %d share %d, want %d share %d", l.WorkspaceQuota, l.WorkspaceShare, tc.quota, tc.share)
			}
		})
	}
}
