package world

import "github.com/apodex/apodex/internal/watch"

// Counters for tests: files hashed (hashFile) and moved out of an upper
// layer (Finish) so far in this process.
func Hashed() int64 { return hashed.Load() }
func Moved() int64  { return moved.Load() }

// Known is w's seed for the watch of its rollouts' workspaces.
func Known(w *World) func(rel string, e watch.Entry) (watch.Sum, bool) { return w.known }

// PrefillOf is what w's rollouts' watches are filled from.
func PrefillOf(w *World) (watch.Prefill, bool) { return w.prefill() }
