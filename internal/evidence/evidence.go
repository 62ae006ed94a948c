// Package evidence is Q, the run's retrieved evidence (SPEC R-PLANE-3,
// R-SEARCH-2): every passage a search returned, every page fetched, every
// span of an input file an agent read, each under a stable id E1, E2, ….
//
// Guarantees:
//   - an id is given once and never reused: ids count up from E1 in the
//     order they were registered, across every agent of a run;
//   - the same text of the same source span always gets the same id (a
//     second read of it names the first id);
//   - every id is in the record as an `evidence` event, written before the
//     id is returned, with its source, span, sha256, retrieval time and the
//     exact text (inline up to InlineLimit bytes, else a blob), so Q is a
//     fold over the record (Fold) and survives compaction (which never
//     touches Q), resume (Restore) and replay;
//   - Text returns exactly the text that was retrieved, or an error;
//   - a replay's Q that follows the original's (Follow) gives every text
//     the original registered the id it had there, whatever order the
//     calls of one turn end in (they run at once), unless the replay went
//     another way (then one Add waits FollowWait and the rest do not).
package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// Item is one entry of Q, as recorded.
type Item = record.Evidence

// InlineLimit is the largest text kept inside the event itself.
const InlineLimit = 8 << 10

// ErrUnknown: no evidence has that id.
var ErrUnknown = errors.New("evidence: unknown evidence id")

// idPattern is an evidence id: E and a positive number.
var idPattern = regexp.MustCompile(`^E[1-9][0-9]{0,8}$`)

// IsID reports whether s has the form of an evidence id (E12).
func IsID(s string) bool { return idPattern.MatchString(s) }

// Registry is a run's Q. It is safe for concurrent use. The zero value is
// not usable; call New.
type Registry struct {
	log *record.Log // nil: nothing is recorded (tests, readers)
	dir string      // where blobs are read from
	now func() time.Time

	mu    sync.Mutex
	items []Item // items[i] has id E(i+1)
	byKey map[string]int
	texts map[int]string // blob texts read or written in this process
	// follow, in a replay, is the original's index (0-based) of each
	// key; grown is closed (and replaced) whenever an item is added.
	follow map[string]int
	grown  chan struct{}
}

// FollowWait bounds how long an Add of a replay waits for the ids before
// the one the original gave its text.
const FollowWait = 5 * time.Second

// Follow makes r, a replay's Q, give each text the id the original run's
// Q (its items, in id order) gave it: an Add of a source span and text the
// original registered as En waits, up to FollowWait, until E1…En-1 are
// registered again. The calls of a turn run at once and end in any order
// (a replayed MCP result at once, a read_file when its file is read);
// without this their ids would follow that order.
func (r *Registry) Follow(original []Item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.follow = make(map[string]int, len(original))
	for i, it := range original {
		r.follow[key(it)] = i
	}
	r.grown = make(chan struct{})
}

// waitTurn waits until the items before the original's index of k are
// registered (a replay), or FollowWait passed.
func (r *Registry) waitTurn(k string) {
	var timeout <-chan time.Time
	for {
		r.mu.Lock()
		want, ok := r.follow[k]
		if !ok || len(r.items) >= want {
			r.mu.Unlock()
			return
		}
		grown := r.grown
		r.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(FollowWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-grown:
		case <-timeout: // the replay went another way: stop following
			r.mu.Lock()
			r.follow = nil
			r.mu.Unlock()
			return
		}
	}
}

// New makes an empty Q that records into log (nil for none). now may be
// nil for time.Now.
func New(log *record.Log, now func() time.Time) *Registry {
	r := &Registry{log: log, now: now, byKey: map[string]int{}, texts: map[int]string{}}
	if log != nil {
		r.dir = log.Dir()
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// FromRecord is a read-only Q of a run directory, folded from its record.
func FromRecord(dir string) (*Registry, error) {
	c, err := record.Read(dir)
	if err != nil {
		return nil, err
	}
	r := New(nil, nil)
	r.dir = dir
	if err := r.Restore(c.Events); err != nil {
		return nil, err
	}
	return r, nil
}

// Fold is Q as the record holds it: every evidence event's item, by id.
// An event whose id is out of sequence, or a known event whose payload does
// not decode, is an error (the record was edited).
func Fold(events []record.Event) ([]Item, error) {
	var items []Item
	for _, e := range events {
		p, err := record.DecodePayload(e)
		if errors.Is(err, record.ErrUnknownType) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if it, ok := p.(*Item); ok {
			if items, err = Next(items, e, it); err != nil {
				return nil, err
			}
		}
	}
	return items, nil
}

// Next is items with it, the evidence of event e, appended; an id out of
// sequence is an error.
func Next(items []Item, e record.Event, it *Item) ([]Item, error) {
	if want := "E" + strconv.Itoa(len(items)+1); it.ID != want {
		return items, fmt.Errorf("evidence: record seq %d has id %s where %s was next", e.Seq, it.ID, want)
	}
	return append(items, *it), nil
}

// Restore replaces Q with the fold of events (a resumed run).
func (r *Registry) Restore(events []record.Event) error {
	items, err := Fold(events)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = items
	r.byKey = map[string]int{}
	r.texts = map[int]string{}
	for i, it := range items {
		r.byKey[key(it)] = i
	}
	return nil
}

func key(it Item) string {
	return fmt.Sprintf("%s\x00%d\x00%d\x00%s", it.Source, it.Span.From, it.Span.To, it.SHA256)
}

// Hash is the "sha256:<hex>" of text.
func Hash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Add registers it (Kind, Source, Span and the text; the rest is filled in)
// for agent and returns it with its id. The same source span with the same
// text returns the id it already has, and reused is true.
func (r *Registry) Add(agent string, it Item, text string) (out Item, reused bool, err error) {
	it.SHA256, it.Bytes, it.Text, it.TextRef, it.ID = Hash(text), len(text), "", "", ""
	r.waitTurn(key(it))
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.byKey[key(it)]; ok {
		return r.items[i], true, nil
	}
	it.ID = "E" + strconv.Itoa(len(r.items)+1)
	it.Retrieved = r.now().UTC()
	if len(text) <= InlineLimit || r.log == nil {
		it.Text = text
	} else {
		ref, err := r.log.PutBlob([]byte(text))
		if err != nil {
			return Item{}, false, fmt.Errorf("evidence: store the text of %s: %w", it.ID, err)
		}
		it.TextRef = ref
	}
	if r.log != nil {
		if _, err := r.log.Append(record.TypeEvidence, agent, it); err != nil {
			return Item{}, false, fmt.Errorf("evidence: record %s: %w", it.ID, err)
		}
	}
	r.items = append(r.items, it)
	r.byKey[key(it)] = len(r.items) - 1
	if r.grown != nil {
		close(r.grown)
		r.grown = make(chan struct{})
	}
	if it.TextRef != "" {
		r.texts[len(r.items)-1] = text
	}
	return it, false, nil
}

// Get returns the item with id.
func (r *Registry) Get(id string) (Item, bool) {
	i, ok := index(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || i >= len(r.items) {
		return Item{}, false
	}
	return r.items[i], true
}

func index(id string) (int, bool) {
	if !IsID(id) {
		return 0, false
	}
	n, err := strconv.Atoi(id[1:])
	return n - 1, err == nil
}

// Len is how many ids Q holds.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// All lists Q in id order.
func (r *Registry) All() []Item {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Item(nil), r.items...)
}

// Text is the exact text of id, read from its blob when not inline.
func (r *Registry) Text(id string) (string, error) {
	it, ok := r.Get(id)
	if !ok {
		return "", fmt.Errorf("%w %s", ErrUnknown, id)
	}
	if it.TextRef == "" {
		return it.Text, nil
	}
	i, _ := index(id)
	r.mu.Lock()
	t, ok := r.texts[i]
	r.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := ReadText(r.dir, it)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.texts[i] = t
	r.mu.Unlock()
	return t, nil
}

// ReadText is the exact text of it, an item of the run in dir: inline, or
// read from its blob and checked against its sha256.
func ReadText(dir string, it Item) (string, error) {
	if it.TextRef == "" {
		return it.Text, nil
	}
	b, err := record.ReadBlob(dir, it.TextRef)
	if err != nil {
		return "", fmt.Errorf("evidence: text of %s: %w", it.ID, err)
	}
	if Hash(string(b)) != it.SHA256 {
		return "", fmt.Errorf("evidence: the stored text of %s does not match its sha256", it.ID)
	}
	return string(b), nil
}

// Find returns the items of source, most recent first (a replayed fetch of
// a URL is served from them).
func (r *Registry) Find(source string) []Item {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Item
	for i := len(r.items) - 1; i >= 0; i-- {
		if r.items[i].Source == source {
			out = append(out, r.items[i])
		}
	}
	return out
}

// Footer is how a tool shows an id to the model:
// "[evidence E7: /inputs/sales.csv lines 1-240, sha256:…]".
func Footer(it Item) string {
	return fmt.Sprintf("[evidence %s: %s lines %d-%d, %s]", it.ID, it.Source, it.Span.From, it.Span.To, shortHash(it.SHA256))
}

func shortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12] + "…"
	}
	return h
}
