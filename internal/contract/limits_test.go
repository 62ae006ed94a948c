package contract

import (
	"strings"
	"testing"
)

// The sandbox limit keys of the budget take sizes with units.
func TestBudgetSandboxLimits(t *testing.T) {
	c, err := Parse([]byte("objective: x\nbudget: {mem_limit: 256MiB, pids_limit: 64, tmp_size: 16MiB, workspace_quota: 2GiB}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Budget; b.MemLimit != 256<<20 || b.PidsLimit != 64 || b.TmpSize != 16<<20 || b.WorkspaceQuota != 2<<30 {
		t.Errorf("budget %+v", b)
	}
	// A bare number would be bytes without saying so: refused.
	for _, bad := range []string{"mem_limit: lots", "tmp_size: 0", "pids_limit: many", "mem_limit: 268435456", "workspace_quota: 5"} {
		if _, err := Parse([]byte("objective: x\nbudget: {"+bad+"}\n"), t.TempDir()); err == nil || !strings.Contains(err.Error(), "budget.") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
