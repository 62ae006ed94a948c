package watch

// Process is the Set of the callers that do not own one yet; For, Lookup,
// Forget and ForgetUnder act on it. It goes once every caller owns its Set.
var Process = NewSet()

// For is Process.For.
func For(dir string) (*Tree, error) { return Process.For(dir) }

// Lookup is Process.Lookup.
func Lookup(dir string) *Tree { return Process.Lookup(dir) }

// Forget is Process.Forget.
func Forget(dir string) { Process.Forget(dir) }

// ForgetUnder is Process.ForgetUnder.
func ForgetUnder(dir string) { Process.ForgetUnder(dir) }
