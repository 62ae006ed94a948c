package publish

import (
	"os"
	"slices"
)

// Restore rebuilds the lease and the manifest from recorded lease events, in
// order, as a resumed run does: grants add paths with their recorded
// baselines, releases end the lease. It emits nothing. Leftover staging
// copies of commands cut off by the stop are removed: a command that did not
// end committed nothing, so nothing half-written is ever delivered.
func (p *Plane) Restore(events []LeaseEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range events {
		switch e.Action {
		case Granted:
			p.holder = e.Agent
			for _, path := range e.Paths {
				if _, ok := p.manifest[path]; !ok {
					p.manifest[path] = &Declared{Path: path, Baseline: e.Baselines[path], Agent: e.Agent}
				} else {
					p.manifest[path].Agent = e.Agent
				}
				if !slices.Contains(p.held, path) {
					p.held = append(p.held, path)
				}
			}
			slices.Sort(p.held)
		case Released:
			if p.holder == e.Agent {
				p.holder, p.held = "", nil
			}
		}
	}
	entries, err := os.ReadDir(p.cfg.Staging)
	if err != nil {
		return err
	}
	for _, en := range entries {
		os.RemoveAll(p.cfg.Staging + "/" + en.Name())
	}
	return nil
}
