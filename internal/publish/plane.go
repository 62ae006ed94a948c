// Package publish is the filesystem publication plane (SPEC §3 R-PUB,
// R-SBX-3): the run-scoped publishing lease, the manifest of declared
// /outputs paths, the shared scratch space and its quota, and the
// reconciliation that turns what is left under /outputs into a delivery.
//
// Guarantees:
//   - at most one agent holds the lease at a time; Claim is atomic, so of
//     any number of concurrent claimants exactly one wins and every other
//     gets a *HeldError naming the holder; the holder may claim again to add
//     paths; the lease ends only by Release;
//   - a declared path is a clean file path under /outputs, never /outputs
//     itself, /outputs/scratch or anything under it, never inside another
//     declared path; the manifest is the union of every grant and only
//     grows; each path's baseline (content hash, or "absent") is taken when
//     it is first declared and is what Reconcile compares against;
//   - file tools (CheckWrite, the workspace.FS hook) may write under
//     /outputs only at the holder's own declared paths, and anyone may write
//     under /outputs/scratch/ within the quota;
//   - in bash (BashMounts) a non-holder sees /outputs read-only and
//     /outputs/scratch/ writable; the holder sees a private copy of
//     /outputs, and when the command ends by itself only its declared paths
//     that changed and are regular files with a single link are copied into
//     the real directory, each atomically (temporary file and rename); a
//     killed command commits nothing; links, directories, special files and
//     undeclared paths are never committed, and the observation names them;
//     so the real outputs directory never holds a link or a half-written
//     file made by an agent;
//   - Reconcile reports every declared path as delivered or failed with one
//     reason, lists undeclared files, and never lists scratch.
//
// The scratch quota counts the bytes of regular files under scratch. It is
// checked before every file-tool write; a bash command writes scratch
// through a sized overlay (sandbox.Quota.Refuse), so a write past what is
// left fails inside the command ("No space left on device") and what fit is
// kept. Where the kernel refuses the overlay, the quota is measured while
// the command runs and after it. Once over it, every scratch write is
// refused until files are deleted.
//
// Events (OnEvent) are emitted in the order of the changes they describe,
// with the plane locked: the callback must not call back into the Plane.
package publish

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/watch"
)

// Limits and names.
const (
	DefaultScratchQuota int64 = 256 << 20
	// MaxPaths bounds one holder's manifest unless Config.MaxPaths sets
	// another cap: the contract's deliverables cap (1,000 by default).
	MaxPaths = 1000
	// Absent is the baseline of a path that did not exist when declared.
	Absent = "absent"
)

// capHint says how the manifest cap can change, for the agent and the user.
const capHint = "Deliver fewer, larger files (a table, an archive); the cap is the task's deliverables cap, which the task file raises with `limits: {deliverables: N}`"

func (p *Plane) maxPaths() int {
	if p.cfg.MaxPaths > 0 {
		return p.cfg.MaxPaths
	}
	return MaxPaths
}

// Lease actions.
const (
	Granted  = "granted"
	Refused  = "refused"
	Released = "released"
)

// Config is one run's publication plane.
type Config struct {
	Outputs string // host directory seen as /outputs (absolute, existing)
	// Staging is a host directory for the holder's per-command copies of
	// /outputs; it must not be inside Outputs. Created if missing.
	Staging      string
	ScratchQuota int64 // bytes under /outputs/scratch (0: DefaultScratchQuota)
	MaxPaths     int   // paths in one manifest (0: MaxPaths)
	// Watch is the Set scratch is watched in for the sandbox (the run's);
	// nil: the sandbox walks it.
	Watch *watch.Set
}

// Declared is one manifest entry.
type Declared struct {
	Path     string `json:"path"`
	Baseline string `json:"baseline"` // Absent or "sha256:<hex>"
	Agent    string `json:"agent"`    // who declared it last
}

// Grant is the answer to a successful Claim.
type Grant struct {
	Holder    string
	Paths     []string          // all of the holder's declared paths, sorted
	Added     []string          // the paths this claim declared, sorted
	Baselines map[string]string // baseline of each of Paths
	// Now is what each of Paths holds at the grant: its hash, or Absent;
	// Sizes the size of each that is a file.
	Now   map[string]string
	Sizes map[string]int64
}

// LeaseEvent is a lease event: the agent who asked (the record event's
// agent) and its payload.
type LeaseEvent struct {
	Agent string
	record.Lease
}

// Errors, matched with errors.Is.
var (
	ErrInvalidClaim = errors.New("publish: invalid claim")
	ErrNoLease      = errors.New("publish: no publishing lease")
	ErrUndeclared   = errors.New("publish: path not in the manifest")
	ErrQuota        = errors.New("publish: scratch quota exceeded")
)

// refusal is an error whose text is for the model and whose kind is a
// sentinel above.
type refusal struct {
	msg  string
	kind error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), kind: kind}
}

// HeldError is Claim's answer while another agent holds the lease.
type HeldError struct {
	Holder string
	Paths  []string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the publishing lease is held by %s (declared: %s); nothing was claimed: wait until %s finishes and claim again, or write intermediate files under /outputs/scratch/",
		e.Holder, list(e.Paths, 8), e.Holder)
}

// Plane is one run's publication plane. It is safe for concurrent use.
type Plane struct {
	// OnEvent, if set before first use, receives every lease event, to be
	// recorded as a record.TypeLease event of the agent.
	OnEvent func(ev LeaseEvent)

	cfg     Config
	scratch string // host directory of /outputs/scratch

	mu       sync.Mutex
	holder   string
	held     []string             // the holder's declared paths, sorted
	manifest map[string]*Declared // every path ever declared
}

// New checks cfg and creates the scratch and staging directories.
func New(cfg Config) (*Plane, error) {
	if cfg.ScratchQuota <= 0 {
		cfg.ScratchQuota = DefaultScratchQuota
	}
	if !filepath.IsAbs(cfg.Outputs) || !filepath.IsAbs(cfg.Staging) {
		return nil, fmt.Errorf("publish: outputs %q and staging %q must be absolute", cfg.Outputs, cfg.Staging)
	}
	cfg.Outputs, cfg.Staging = filepath.Clean(cfg.Outputs), filepath.Clean(cfg.Staging)
	if fi, err := os.Stat(cfg.Outputs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("publish: outputs %s is not a directory", cfg.Outputs)
	}
	if rel, err := filepath.Rel(cfg.Outputs, cfg.Staging); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("publish: staging %s is inside outputs %s", cfg.Staging, cfg.Outputs)
	}
	if err := os.MkdirAll(cfg.Staging, 0o700); err != nil {
		return nil, fmt.Errorf("publish: staging: %w", err)
	}
	p := &Plane{cfg: cfg, scratch: filepath.Join(cfg.Outputs, "scratch"), manifest: map[string]*Declared{}}
	if err := p.ensureScratch(); err != nil {
		return nil, err
	}
	return p, nil
}

// ensureScratch makes sure /outputs/scratch is a real directory.
func (p *Plane) ensureScratch() error {
	if err := os.Mkdir(p.scratch, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("publish: scratch: %w", err)
	}
	if fi, err := os.Lstat(p.scratch); err != nil || !fi.IsDir() {
		return fmt.Errorf("publish: %s is not a directory", p.scratch)
	}
	return nil
}

// Claim takes the lease for agent, or extends agent's manifest, with paths.
// Nothing changes unless every path is acceptable.
func (p *Plane) Claim(agent string, paths []string) (Grant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, err := p.claim(agent, paths)
	if err != nil {
		p.emit(LeaseEvent{Agent: agent, Lease: record.Lease{Action: Refused, Holder: p.holder, Paths: paths[:min(len(paths), p.maxPaths())], Reason: err.Error()}})
		return Grant{}, err
	}
	p.emit(LeaseEvent{Agent: agent, Lease: record.Lease{Action: Granted, Holder: agent, Paths: g.Added, Baselines: pick(g.Baselines, g.Added)}})
	return g, nil
}

func (p *Plane) claim(agent string, paths []string) (Grant, error) {
	if strings.TrimSpace(agent) == "" {
		return Grant{}, refuse(ErrInvalidClaim, "claim_outputs refused: no agent name")
	}
	if p.holder != "" && p.holder != agent {
		return Grant{}, &HeldError{Holder: p.holder, Paths: slices.Clone(p.held)}
	}
	if err := validate(paths, p.maxPaths()); err != nil {
		return Grant{}, err
	}
	var added []string
	for _, pp := range paths {
		if !slices.Contains(p.held, pp) {
			added = append(added, pp)
		}
	}
	if n := len(p.held) + len(added); n > p.maxPaths() {
		return Grant{}, refuse(ErrInvalidClaim, "claim_outputs refused: your manifest would have %d paths, more than the manifest cap of %d; nothing was claimed. %s", n, p.maxPaths(), capHint)
	}
	baselines := map[string]string{}
	root, err := os.OpenRoot(p.cfg.Outputs)
	if err != nil {
		return Grant{}, fmt.Errorf("publish: %w", err)
	}
	defer root.Close()
	var problems []string
	declared := p.paths()
	for _, pp := range added {
		for _, other := range declared {
			if inside(pp, other) || inside(other, pp) {
				problems = append(problems, fmt.Sprintf("%s and %s (already declared) would be a file inside a file", pp, other))
			}
		}
		if d, ok := p.manifest[pp]; ok {
			baselines[pp] = d.Baseline
			continue
		}
		st := look(root, rel(pp))
		switch {
		case st.kind == kindAbsent:
			baselines[pp] = Absent
		case st.kind == kindFile && !st.parent:
			baselines[pp] = st.hash
		case st.parent:
			problems = append(problems, fmt.Sprintf("%s cannot be created: %s %s", pp, st.where, st.what()))
		default:
			problems = append(problems, fmt.Sprintf("%s %s; a declared path must be a regular file or not exist yet", st.where, st.what()))
		}
	}
	if len(problems) > 0 {
		return Grant{}, refuse(ErrInvalidClaim, "claim_outputs refused: %s; nothing was claimed", strings.Join(problems, "; "))
	}
	p.holder = agent
	for _, pp := range added {
		p.manifest[pp] = &Declared{Path: pp, Baseline: baselines[pp], Agent: agent}
	}
	p.held = append(p.held, added...)
	slices.Sort(p.held)
	slices.Sort(added)
	now, sizes := map[string]string{}, map[string]int64{}
	for _, pp := range p.held {
		baselines[pp] = p.manifest[pp].Baseline
		// What is there now may differ from the baseline: an earlier
		// holder of this run wrote it.
		if st := look(root, rel(pp)); st.kind == kindFile && !st.parent {
			now[pp], sizes[pp] = st.hash, st.size
		} else {
			now[pp] = Absent
		}
	}
	return Grant{Holder: agent, Paths: slices.Clone(p.held), Added: added, Baselines: baselines, Now: now, Sizes: sizes}, nil
}

// Release ends agent's lease; it reports whether agent held it. The
// manifest keeps its paths.
func (p *Plane) Release(agent, reason string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holder == "" || p.holder != agent {
		return false
	}
	p.emit(LeaseEvent{Agent: agent, Lease: record.Lease{Action: Released, Holder: agent, Paths: p.held, Reason: reason}})
	p.holder, p.held = "", nil
	return true
}

// Holder returns the lease holder ("" when free) and its declared paths.
func (p *Plane) Holder() (agent string, paths []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder, slices.Clone(p.held)
}

// Manifest returns every declared path, sorted.
func (p *Plane) Manifest() []Declared {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Declared, 0, len(p.manifest))
	for _, d := range p.manifest {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Declared) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// paths lists the manifest, sorted; p.mu must be held.
func (p *Plane) paths() []string {
	out := make([]string, 0, len(p.manifest))
	for pp := range p.manifest {
		out = append(out, pp)
	}
	slices.Sort(out)
	return out
}

func (p *Plane) emit(ev LeaseEvent) {
	if p.OnEvent == nil {
		return
	}
	ev.Paths = slices.Clone(ev.Paths)
	p.OnEvent(ev)
}
