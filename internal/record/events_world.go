package record

// TypeWorld names the world a rollout started from; it follows run_started.
const TypeWorld = "world"

// World is the payload of a world event, and the "world" entry of
// run_started's settings: which stored world the run was built from and how.
type World struct {
	ID        string         `json:"id"` // w- and 12 hex of the world's content hash
	Name      string         `json:"name"`
	Family    string         `json:"family"` // file, search or code
	Generator WorldGenerator `json:"generator"`
	// Sandbox is how the rollout's /workspace was made: overlay (lower =
	// the store, upper = the rollout), copy (the fallback), or none (the
	// world has no initial workspace). Inputs are hard links to the store.
	Sandbox string `json:"sandbox"`
	// Fallback says why the overlay was not used.
	Fallback string `json:"fallback,omitempty"`
	// IDMap is how the sandbox uid owns the overlay's lower layer (a root
	// runtime): "idmapped", or "none: why" (each entry is chowned instead).
	IDMap string `json:"idmap,omitempty"`
}

// WorldGenerator is the generator a world came from; empty for a hand-made one.
type WorldGenerator struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Seed    int64  `json:"seed"`
	Level   int    `json:"level,omitempty"`
}

func init() { Register(TypeWorld, func() any { return new(World) }) }
