package gate

import "github.com/apodex/apodex/internal/sandbox"

// Sandbox is the sandbox verification clauses run in: the kind the
// run's commands ran under (bwrap or native) where it still works, else
// the best one here (a verifier needs the planes mapped, which none does
// not do).
func Sandbox(kind string) (sandbox.Runner, error) {
	if kind == sandbox.KindBwrap || kind == sandbox.KindNative {
		if r, err := sandbox.New(kind); err == nil {
			return r, nil
		}
	}
	return sandbox.New(sandbox.KindAuto)
}
