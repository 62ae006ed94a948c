package world

// Counters for tests: files hashed (hashFile) and moved out of an upper
// layer (Finish) so far in this process.
func Hashed() int64 { return hashed.Load() }
func Moved() int64  { return moved.Load() }
