package netns

import (
	"strings"
	"testing"
)

// TestPastaArgs: pasta forwards no port either way and maps no gateway to
// the host's loopback (what TestOutboundNetwork cannot try without sending
// a packet off the loopback).
func TestPastaArgs(t *testing.T) {
	args := strings.Join(pastaArgs(), " ")
	for _, want := range []string{"-t none", "-u none", "-T none", "-U none", "--no-map-gw", "--netns /proc/self/fd/3", "--userns /proc/self/fd/4"} {
		if !strings.Contains(args, want) {
			t.Errorf("pasta's arguments %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--runas") {
		t.Errorf("pasta's arguments %q set its uid", args)
	}
}
