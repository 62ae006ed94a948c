// Package record is a run's record (the replay record): the catalogue of
// every event type with its payload, and the log they are written to, whose
// file, hash chain, blobs, readers and subscribers are package
// record/eventlog (record re-exports its names: callers use record's).
//
// Guarantees:
//   - every event type string and its payload struct are declared in this
//     package (files events_<domain>.go for each domain), one typed struct
//     per type, and documented in docs/record.md (tests enforce both);
//     DecodePayload returns the typed payload, ErrUnknownType for a type
//     this version does not know;
//   - what the log guarantees (one line per event in one write, seq without
//     gap or duplicate, the same bytes for the same event, the hash chain
//     and head, durable Sync, blobs stored once by content, Follow and
//     Subscribe yielding each event once in order) is package eventlog's.
package record

import (
	"context"
	"io"
	"iter"
	"time"

	"github.com/apodex/apodex/internal/record/eventlog"
)

// The file behind the record (events.jsonl, its hash chain and head, the
// blobs, its readers, followers and subscribers) is package
// record/eventlog; these are its names as the record's callers use them.

type (
	// Log is a run's record open for appending (eventlog.Log).
	Log = eventlog.Log
	// Event is one line of the record: the envelope and the raw payload.
	Event = eventlog.Event
	// Contents is a record read whole.
	Contents = eventlog.Contents
	// Scanner reads a record line by line, checking its chain.
	Scanner = eventlog.Scanner
	// Cursor hands a writer's events to a reader in the same process.
	Cursor = eventlog.Cursor
	// Head is events.head: the seq and hash of the last durable line.
	Head = eventlog.Head
	// Integrity is what a read found of the hash chain and the head.
	Integrity = eventlog.Integrity
	// IntegrityError names the first line of a record that fails its chain.
	IntegrityError = eventlog.IntegrityError
)

// File names inside a run directory, and the longest line.
const (
	EventsFile = eventlog.EventsFile
	BlobsDir   = eventlog.BlobsDir
	HeadFile   = eventlog.HeadFile
	MaxLine    = eventlog.MaxLine
)

// The log's errors (errors.Is matches them).
var (
	ErrReservedField = eventlog.ErrReservedField
	ErrGap           = eventlog.ErrGap
	ErrTampered      = eventlog.ErrTampered
	ErrLineTooLong   = eventlog.ErrLineTooLong
	ErrFollowShrank  = eventlog.ErrFollowShrank
	ErrClosed        = eventlog.ErrClosed
)

// Create starts a new record in dir (eventlog.Create).
func Create(dir string, now func() time.Time) (*Log, error) { return eventlog.Create(dir, now) }

// Open reopens the record in dir for appending (eventlog.Open).
func Open(dir string, now func() time.Time) (*Log, Contents, bool, error) {
	return eventlog.Open(dir, now)
}

// Read reads the record in dir (eventlog.Read).
func Read(dir string) (Contents, error) { return eventlog.Read(dir) }

// ReadChecked reads the record in dir and fails on a broken chain
// (eventlog.ReadChecked).
func ReadChecked(dir string) (Contents, error) { return eventlog.ReadChecked(dir) }

// Parse reads a record from r (eventlog.Parse).
func Parse(r io.Reader) (Contents, error) { return eventlog.Parse(r) }

// First is the record's first event (eventlog.First).
func First(dir string) (Event, error) { return eventlog.First(dir) }

// Last is the record's last complete event (eventlog.Last).
func Last(dir string) (Event, error) { return eventlog.Last(dir) }

// Follow yields the record's events after seq as they land (eventlog.Follow).
func Follow(ctx context.Context, dir string, after int64) iter.Seq2[Event, error] {
	return eventlog.Follow(ctx, dir, after)
}

// NewScanner reads a record from r (eventlog.NewScanner).
func NewScanner(r io.Reader) *Scanner { return eventlog.NewScanner(r) }

// NewScannerAfter reads a record from r, from the line after seq
// (eventlog.NewScannerAfter).
func NewScannerAfter(r io.Reader, seq int64) *Scanner { return eventlog.NewScannerAfter(r, seq) }

// ReadHead reads events.head (eventlog.ReadHead).
func ReadHead(dir string) (Head, error) { return eventlog.ReadHead(dir) }

// Cut keeps the first n lines of the record (eventlog.Cut).
func Cut(dir string, n int) error { return eventlog.Cut(dir, n) }

// Reseal rewrites the record's chain and head (eventlog.Reseal).
func Reseal(dir string) error { return eventlog.Reseal(dir) }

// BlobPath is the file of blob ref in dir (eventlog.BlobPath).
func BlobPath(dir, ref string) (string, error) { return eventlog.BlobPath(dir, ref) }

// ReadBlob reads blob ref of dir (eventlog.ReadBlob).
func ReadBlob(dir, ref string) ([]byte, error) { return eventlog.ReadBlob(dir, ref) }
