package spec

import (
	"fmt"
	"strings"
)

// DefaultEnv is the environment when Spec.Env is nil.
var DefaultEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
}

// Env returns the environment a spec asks for, checked.
func Env(spec Spec) ([]string, error) {
	if spec.Env == nil {
		return DefaultEnv, nil
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("sandbox: env entry %q is not KEY=VALUE", kv)
		}
	}
	return spec.Env, nil
}
