package runstate

// A checkpoint is the projection of a run written next to its record:
// the State at some seq, serialized, with the place in events.jsonl it
// covers. Readers start from it and fold only the events after it
// (LoadFrom); it is a cache of the record, never a source: a checkpoint
// that is missing, unreadable, of another version or of another shape
// of State, or whose last line is no longer the record's line at that
// place, is ignored and the record folded from its first line.

import (
	"bufio"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/record"
)

// CheckpointFile is the projection checkpoint inside a run directory.
const CheckpointFile = "projection.json"

// CheckpointEvery is how many events a live run folds between two
// checkpoints; readers that fold more than this after a checkpoint write
// a new one (when the run is not live).
const CheckpointEvery = 1000

// checkpointVersion changes when the file's layout does; a change of
// State's own shape is caught by stateShape.
const checkpointVersion = 3 // 3: Files is the last field (LoadViewFrom stops before it)

// checkpoint is the file's content.
type checkpoint struct {
	Version int    `json:"version"`
	Shape   string `json:"shape"` // stateShape of the writer
	Seq     int64  `json:"seq"`   // the last event folded
	Events  int    `json:"events"`
	// Offset is where the line of Seq ends in events.jsonl (after its
	// newline); LastLen that line's length with its newline and LastHash
	// its hash as the record chains it ("sha256:<hex>").
	Offset   int64  `json:"offset"`
	LastLen  int    `json:"last_len"`
	LastHash string `json:"last_hash"`
	// Head is events.head when the checkpoint was written (seq 0 and
	// missing: there was none); Integrity what the fold found so far.
	Head      record.Head      `json:"head"`
	Integrity record.Integrity `json:"integrity"`
}

// The file is the checkpoint as one line of JSON, then the State in gob
// (every exported field by its Go name, the JSON views' tags not
// applying: a field they leave out is still part of the state). Gob,
// not JSON, because a long run's state is megabytes that every show
// decodes: gob decodes them several times faster.

// errViewOnly: a state loaded without its file provenance (LoadViewFrom)
// is not a whole state to checkpoint.
var errViewOnly = errors.New("runstate: a view without the file provenance is not checkpointed")

// errNotSerializable: the state holds a value JSON cannot carry back (an
// error, an interface); such a state is not checkpointed.
var errNotSerializable = errors.New("runstate: the state holds a value a checkpoint cannot keep")

// WriteCheckpoint writes the state of l as its run's checkpoint (atomically:
// a temporary file renamed over it). It writes nothing, without error, when
// l's end in the record is not known (an error stopped the fold) or the
// state holds what cannot be serialized (a board event the board refused).
func (l *Loaded) WriteCheckpoint() error {
	if l.Files == nil {
		return errViewOnly
	}
	b, ok, err := l.Boundary()
	if !ok || err != nil {
		return err
	}
	body, err := planState(l.State)
	if errors.Is(err, errNotSerializable) {
		return nil
	}
	if err != nil {
		return err
	}
	head, err := record.ReadHead(l.Dir)
	if err != nil {
		return nil
	}
	cp := checkpoint{Version: checkpointVersion, Shape: stateShape(), Seq: l.Seq, Events: l.Events, Offset: b.End,
		LastLen: b.LastLen, LastHash: b.LastHash, Head: head, Integrity: l.Integrity}
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	// The state is encoded into the file as it is written, never held
	// whole: a long run's is megabytes.
	return writeAtomic(filepath.Join(l.Dir, CheckpointFile), func(w io.Writer) error {
		if _, err := w.Write(append(data, '\n')); err != nil {
			return err
		}
		return body.encode(w)
	})
}

// LoadFrom is Load that starts from the run's checkpoint when it still
// matches the record, folding only the events after it; tail is how many
// events it folded from the record (all of them when no checkpoint
// served). What it returns is what Load returns, Integrity included, for
// the events after the checkpoint; for those before it, the integrity
// the checkpoint's writer found.
func LoadFrom(dir string) (l *Loaded, tail int, err error) { return loadFrom(dir, true) }

// LoadViewFrom is LoadFrom without the file provenance (State.Files is
// nil): what show, status and runs read, in a fraction of the memory of a
// run that wrote many files. Its state writes no checkpoint.
func LoadViewFrom(dir string) (l *Loaded, tail int, err error) { return loadFrom(dir, false) }

func loadFrom(dir string, files bool) (l *Loaded, tail int, err error) {
	head, err := record.ReadHead(dir)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return nil, 0, fmt.Errorf("runstate: open the record: %w", err)
	}
	defer f.Close()
	if l, tail, ok := fromCheckpoint(dir, f, head, files); ok {
		return l, tail, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	l = &Loaded{State: New(), Dir: dir, off: -1}
	if !files {
		l.Files = nil
	}
	cr := &countingReader{r: f}
	sc := record.NewScanner(cr)
	sc.SetHead(head)
	end, err := foldTail(l, sc, cr, 0)
	l.Integrity = sc.Integrity()
	l.off = end
	if l.RunID == "" {
		l.RunID = filepath.Base(dir)
	}
	return l, l.Events, err
}

// fromCheckpoint is the state of the checkpoint plus the record after it;
// ok is false when the checkpoint does not serve (then the caller folds
// the whole record, which also names any damage exactly).
func fromCheckpoint(dir string, f *os.File, head record.Head, files bool) (l *Loaded, tail int, ok bool) {
	cf, err := os.Open(filepath.Join(dir, CheckpointFile))
	if err != nil {
		return nil, 0, false
	}
	defer cf.Close()
	body := bufio.NewReaderSize(cf, 64<<10) // streamed: the state is decoded as it is read
	header, err := body.ReadBytes('\n')
	if err != nil {
		return nil, 0, false
	}
	var cp checkpoint
	if json.Unmarshal(header, &cp) != nil || cp.Version != checkpointVersion || cp.Shape != stateShape() ||
		!(Boundary{End: cp.Offset, LastLen: cp.LastLen, LastHash: cp.LastHash}).Holds(f) {
		return nil, 0, false // another build's, or the record is not the one it covered
	}
	st := New()
	if decodeState(st, body, files) != nil || st.Seq != cp.Seq {
		return nil, 0, false
	}
	l = &Loaded{State: st, Dir: dir, Events: cp.Events, Integrity: cp.Integrity, off: -1}
	if _, err := f.Seek(cp.Offset, io.SeekStart); err != nil {
		return nil, 0, false
	}
	cr := &countingReader{r: f}
	sc := record.NewScannerAfter(cr, cp.Seq)
	switch {
	case !head.Missing && head.Seq > cp.Seq:
		sc.SetHead(head) // the tail holds the head's line: the scan checks it
	case head != cp.Head:
		return nil, 0, false // the head moved back or changed: let the whole fold say how
	}
	first := true
	end, err := foldTail(l, sc, cr, cp.Offset, func(e record.Event) bool {
		if !first {
			return true
		}
		first = false
		// The chain across the checkpoint: the first line after it names
		// the checkpoint's last line (or, in an unchained record, nothing).
		return e.Prev == cp.LastHash || (e.Prev == "" && !cp.Integrity.Chained)
	})
	in := sc.Integrity()
	if err != nil || in.Err != nil || (head.Seq > cp.Seq && l.Seq < head.Seq) {
		return nil, 0, false
	}
	if !l.Integrity.Chained && in.Chained {
		l.Integrity.Chained, l.Integrity.From = true, in.From
	}
	l.Integrity.Head, l.Integrity.HeadSeq = head, head.Seq
	l.off = end
	if l.RunID == "" {
		l.RunID = filepath.Base(dir)
	}
	return l, l.Events - cp.Events, true
}

// errChain: the first event after a checkpoint does not chain to it.
var errChain = errors.New("runstate: the record does not continue the checkpoint")

// foldTail folds the events sc yields into l, starting at byte start of
// the record, and returns where the last complete line ends (-1 when that
// is not known: the lines are not as apodex writes them). check, when
// given, may refuse an event before it is applied.
func foldTail(l *Loaded, sc *record.Scanner, cr *countingReader, start int64, check ...func(record.Event) bool) (int64, error) {
	end := start
	for sc.Next() {
		e := sc.Event()
		for _, c := range check {
			if !c(e) {
				return -1, errChain
			}
		}
		if err := l.Apply(e); err != nil {
			return -1, err
		}
		l.Events++
		end += int64(len(e.Raw)) + 1 // apodex writes each line as its JSON and a newline
	}
	l.TornTail = sc.TornTail()
	l.Skipped = l.Skipped[:0]
	for _, u := range l.Unknown {
		l.Skipped = append(l.Skipped, skippedNote(u))
	}
	if err := sc.Err(); err != nil {
		return -1, err
	}
	if read := start + cr.n; read < end || (!l.TornTail && read != end) {
		// blank lines or other bytes apodex does not write: the offsets
		// summed above are not the file's
		return -1, nil
	}
	return end, nil
}

// A checkpoint's state is one gob stream: the list of State's exported
// fields (stateField), then the value of each field that has data, in
// that order. A field goes by its Go name (the JSON views' tags do not
// apply: a field they leave out is still part of the state), as JSON
// bytes when its type marshals itself to JSON (a sub-view with unexported
// parts, like the board), else as itself; Zero and Empty say it was the
// zero value, or an empty slice or map that is not nil, and have no value.
type stateField struct {
	Name        string
	JSON        bool
	Zero, Empty bool
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// stateBody is a state's fields as a checkpoint holds them, ready to
// encode (planState).
type stateBody struct {
	fields []stateField
	values []reflect.Value
}

// planState lists every exported field of s to encode (the JSON of those
// that marshal themselves taken now). A state holding a non-nil interface
// (an error) is refused: it cannot come back as it was.
func planState(s *State) (*stateBody, error) {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	var b stateBody
	for _, i := range checkpointOrder(t) {
		sf, fv := t.Field(i), v.Field(i)
		f := stateField{Name: sf.Name}
		switch {
		case fv.IsZero():
			f.Zero = true
		case sf.Type.Kind() == reflect.Interface:
			return nil, fmt.Errorf("%w: %s", errNotSerializable, sf.Name)
		case (sf.Type.Kind() == reflect.Slice || sf.Type.Kind() == reflect.Map) && fv.Len() == 0:
			f.Empty = true
		case sf.Type.Implements(jsonMarshaler) || reflect.PointerTo(sf.Type).Implements(jsonMarshaler):
			data, err := json.Marshal(fv.Addr().Interface())
			if err != nil {
				return nil, fmt.Errorf("runstate: checkpoint %s: %w", sf.Name, err)
			}
			f.JSON = true
			b.values = append(b.values, reflect.ValueOf(data))
		default:
			b.values = append(b.values, fv)
		}
		b.fields = append(b.fields, f)
	}
	return &b, nil
}

// encode writes the fields to w as one gob stream (each field's value is
// one gob message, the largest thing held).
func (b *stateBody) encode(w io.Writer) error {
	enc := gob.NewEncoder(w)
	if err := enc.Encode(b.fields); err != nil {
		return fmt.Errorf("runstate: checkpoint: %w", err)
	}
	for _, val := range b.values {
		if err := enc.EncodeValue(val); err != nil {
			return fmt.Errorf("runstate: checkpoint: %w", err)
		}
	}
	return nil
}

// lastField is the field a checkpoint holds last: the file provenance,
// most of a long run's state, which LoadViewFrom does not decode.
const lastField = "Files"

// checkpointOrder is the order of State's exported fields in a checkpoint:
// as declared, lastField last.
func checkpointOrder(t reflect.Type) []int {
	var order []int
	last := -1
	for i := range t.NumField() {
		switch sf := t.Field(i); {
		case !sf.IsExported():
		case sf.Name == lastField:
			last = i
		default:
			order = append(order, i)
		}
	}
	return append(order, last)
}

// decodeState decodes what stateBody.encode wrote into s, then rebuilds what
// State keeps unexported. A field the data does not name keeps New's value.
// Without files it stops before lastField, and s.Files is nil.
func decodeState(s *State, r io.Reader, files bool) error {
	dec := gob.NewDecoder(r)
	var fields []stateField
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("runstate: checkpoint: %w", err)
	}
	v := reflect.ValueOf(s).Elem()
	for _, f := range fields {
		sf, ok := v.Type().FieldByName(f.Name)
		if !ok || !sf.IsExported() {
			return fmt.Errorf("runstate: checkpoint: State has no field %s", f.Name)
		}
		if f.Name == lastField && !files {
			break
		}
		fv := v.FieldByIndex(sf.Index)
		fv.SetZero()
		var err error
		switch {
		case f.Zero:
		case f.Empty && sf.Type.Kind() == reflect.Slice:
			fv.Set(reflect.MakeSlice(sf.Type, 0, 0))
		case f.Empty:
			fv.Set(reflect.MakeMap(sf.Type))
		case f.JSON:
			var data []byte
			if err = dec.Decode(&data); err == nil {
				err = json.Unmarshal(data, fv.Addr().Interface())
			}
		default:
			err = dec.DecodeValue(fv.Addr())
		}
		if err != nil {
			return fmt.Errorf("runstate: checkpoint %s: %w", f.Name, err)
		}
	}
	if !files {
		s.Files = nil
	}
	s.reindex()
	return nil
}

// reindex rebuilds State's unexported indexes from its exported fields.
// A new unexported field of State must be rebuilt here (the checkpoint
// test fails until it is).
func (s *State) reindex() {
	s.agents = make(map[string]*Agent, len(s.Agents))
	for _, a := range s.Agents {
		s.agents[a.ID] = a
	}
	s.assignments = make(map[string]*Assignment, len(s.Assignments))
	for _, a := range s.Assignments {
		s.assignments[a.Assignment.Assignment] = a
	}
}

// stateShape names the structure of State (field names and types, all
// the way down): a checkpoint written by a build whose State differs is
// not read.
var stateShape = sync.OnceValue(func() string {
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		b.WriteString(t.String())
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			b.WriteByte('<')
			walk(t.Elem())
			b.WriteByte('>')
		case reflect.Map:
			b.WriteByte('<')
			walk(t.Key())
			b.WriteByte(',')
			walk(t.Elem())
			b.WriteByte('>')
		case reflect.Struct:
			b.WriteByte('{')
			for i := range t.NumField() {
				f := t.Field(i)
				b.WriteString(f.Name + " " + string(f.Tag) + " ")
				walk(f.Type)
				b.WriteByte(';')
			}
			b.WriteByte('}')
		}
	}
	walk(reflect.TypeOf(State{}))
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
})

// writeAtomic writes to path what write writes, through a temporary file
// in its directory (buffered) renamed over it: a reader sees the old file
// or the new one.
func writeAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(tmp, 64<<10)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644) // as the record: readable where the run is
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
