package bwrap

import (
	"slices"
	"testing"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

func TestBwrapArgs(t *testing.T) {
	args, err := Args(spec.Spec{Command: "echo hi", Dir: "/w"}, "/copy/etc")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--remount-ro"} {
		if !slices.Contains(args, want) {
			t.Errorf("missing %s in %q", want, args)
		}
	}
	if slices.Contains(args, "--share-net") {
		t.Error("--share-net without Network")
	}
	if i := slices.Index(args, "--cap-drop"); i < 0 || args[i+1] != "ALL" {
		t.Error("capabilities not dropped")
	}
	if tail := args[len(args)-3:]; !slices.Equal(tail, []string{"/bin/sh", "-c", "echo hi"}) {
		t.Errorf("command %q", tail)
	}
	args, _ = Args(spec.Spec{Command: "true", Network: true}, "/copy/etc")
	if !slices.Contains(args, "--share-net") {
		t.Error("no --share-net with Network")
	}
}
