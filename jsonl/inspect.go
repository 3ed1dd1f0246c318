package jsonl

import (
	"context"
	"path/filepath"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Inspection is a read-only diagnosis of one stored session: what a read
// handle would serve, plus the physical facts a read hides (the torn tail a
// write handle would cut, records recovered from a torn zstd frame) and the
// current lease.
type Inspection struct {
	// Header is the session header.
	Header wire.Header
	// Pending is true for a created session that has no log yet; the other
	// physical fields are then zero.
	Pending bool
	// Path is the log file (empty when pending).
	Path string
	// Events is the log as a read serves it: the valid prefix followed by
	// the Recovered records of a torn final zstd frame. It is the caller's
	// own copy.
	Events []session.Event
	// Recovered is how many of Events come from a torn final zstd frame (they
	// are re-written as a fresh frame by the next write-handle mutation).
	Recovered int
	// InheritedEventCount is the fork cut derived from the log.
	InheritedEventCount int64
	// FileSize is the physical size of the log.
	FileSize int64
	// CommittedBytes ends the last valid record (raw) or the last complete
	// frame (zstd).
	CommittedBytes int64
	// TornBytes is FileSize - CommittedBytes: the suffix the next
	// write-handle mutation cuts off.
	TornBytes int64
	// Lease is the current lease, or nil when none is held.
	Lease *wire.Lease
	// MigratedFrom is the older generation file the log was migrated from
	// (kept beside it, never modified), or empty.
	MigratedFrom string
}

// Inspect validates a session's log exactly as a read does and reports what
// it found, without taking ownership or modifying anything. An absent session
// is ErrNotFound; a log a read would refuse is refused with the same error.
func (s *Store) Inspect(ctx context.Context, id string) (*Inspection, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sd, err := s.locateStored(id)
	if err != nil {
		return nil, err
	}
	if sd.generation == "" {
		lease, err := s.pendingLease(sd)
		if err != nil {
			return nil, err
		}
		if lease == nil {
			return nil, notFound(id)
		}
		return &Inspection{Header: lease.Pending.Header, Pending: true, Events: []session.Event{},
			InheritedEventCount: lease.Pending.InheritedEventCount, Lease: lease}, nil
	}
	lease, err := s.readLease(sd.dir)
	if err != nil {
		return nil, err
	}
	r, err := s.scanFile(id, sd.generation)
	if err != nil {
		return nil, err
	}
	events := append(session.CloneEvents(r.events), session.CloneEvents(r.recovered)...)
	inherited, err := inheritedCount(r.header, events)
	if err != nil {
		return nil, err
	}
	var migratedFrom string
	if rec, err := s.readMigrationRecord(sd.dir); err != nil {
		return nil, err
	} else if rec != nil && rec.To == filepath.Base(sd.generation) {
		migratedFrom = rec.From
	}
	return &Inspection{
		MigratedFrom:        migratedFrom,
		Header:              r.header,
		Path:                sd.generation,
		Events:              events,
		Recovered:           len(r.recovered),
		InheritedEventCount: inherited,
		FileSize:            r.size,
		CommittedBytes:      r.committedBytes,
		TornBytes:           r.size - r.committedBytes,
		Lease:               lease,
	}, nil
}

// EncodeHeaderLine renders a header as the store writes it at the head of a
// log: {"type":"session","version":3,...} with the key order of FORMAT.md §2.1,
// followed by a newline; a format v0 header (Version 0 with a SeedLength
// when seeded) is rendered in the v0 shape of FORMAT.md §8.2.
func EncodeHeaderLine(h wire.Header) ([]byte, error) {
	if h.Version == wire.FormatVersionV0 {
		return encodeHeaderLineV0(h, h.SeedLength)
	}
	return encodeHeaderLine(h)
}
