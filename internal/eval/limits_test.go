package eval

import (
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/sandbox"
)

// A world's task budget bounds its rollouts' commands as apodex run --task
// does: its limits are taken and a workspace quota it asks for is a hard
// bound; without one the built-in ceiling stays measured.
func TestRolloutTakesTheTaskBudgetsLimits(t *testing.T) {
	s := rolloutSettings(Config{}, contract.Budget{MemLimit: 300 << 20, PidsLimit: 77, TmpSize: 9 << 20, WorkspaceQuota: 40 << 20}, "")
	l := s.Limits
	if l.MemLimit != 300<<20 || l.PidsLimit != 77 || l.TmpSize != 9<<20 || l.WorkspaceQuota != 40<<20 || l.WorkspaceShare != sandbox.DefaultWorkspaceShare {
		t.Errorf("limits %+v", l)
	}
	l = rolloutSettings(Config{}, contract.Budget{}, "").Limits
	if l.WorkspaceQuota != sandbox.DefaultWorkspaceBytes || l.WorkspaceShare != sandbox.DefaultWorkspaceRefuseNear || l.MemLimit != sandbox.DefaultMemory {
		t.Errorf("no budget: %+v", l)
	}
}
