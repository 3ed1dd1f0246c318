package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// MigrationResult describes the migration of one session to the current
// format, done or (with DryRun) planned.
type MigrationResult struct {
	// SessionID is the session.
	SessionID string `json:"sessionId"`
	// From and To are the old and the new generation files.
	From string `json:"from"`
	To   string `json:"to"`
	// FromVersion and ToVersion are their format versions.
	FromVersion int `json:"fromVersion"`
	ToVersion   int `json:"toVersion"`
	// Events is the number of events the new generation holds.
	Events int64 `json:"events"`
	// InheritedEventCount is the fork cut of the migrated session.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// DroppedBytes is the damaged tail of the old file left behind (the old
	// file itself is never modified).
	DroppedBytes int64 `json:"droppedBytes"`
	// DryRun is true when nothing was written.
	DryRun bool `json:"dryRun,omitempty"`
	// Current is true when the session already was in the current format
	// (nothing to do).
	Current bool `json:"current,omitempty"`
}

// MigrateOptions tunes Migrate.
type MigrateOptions struct {
	// DryRun plans the migration and validates the old log without writing.
	DryRun bool
}

// migrationFrameBytes bounds the plaintext of one zstd frame of a migrated
// log, so that a large log is not one huge frame.
const migrationFrameBytes = 4 << 20

// Migrate writes the current generation (session.v3.jsonl[.zstd]) of a
// session stored in an older readable format (v0, the published harness's
// format), from the old log's valid events, and leaves the old file
// untouched beside it. The new file is published with a no-overwrite link
// and a directory fsync, after a migration record naming its source; from
// then on the new generation is the session. A session already current is
// reported with Current set. The session's lease is taken for the duration,
// so a session with a live writer is ErrAlreadyOwned.
func (s *Store) Migrate(ctx context.Context, id string, opts MigrateOptions) (*MigrationResult, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if !found || sd.generation == "" {
		return nil, notFound(id)
	}
	if v, _ := generationVersion(filepath.Base(sd.generation)); v == wire.FormatVersion {
		return &MigrationResult{SessionID: id, From: filepath.Base(sd.generation), To: filepath.Base(sd.generation),
			FromVersion: wire.FormatVersion, ToVersion: wire.FormatVersion, Current: true, DryRun: opts.DryRun}, nil
	}
	if opts.DryRun {
		return s.migrateDir(id, &sd, true)
	}
	handle := "migrate-" + randhex.String(8)
	if err := s.acquireLease(sd.dir, s.newLease(handle, Owner{})); err != nil {
		if errors.Is(err, errLeaseHeld) {
			return nil, alreadyOwned(id)
		}
		return nil, err
	}
	res, err := s.migrateDir(id, &sd, false)
	if rerr := s.releaseLease(sd.dir, handle); rerr != nil && err == nil {
		err = rerr
	}
	return res, err
}

// ensureCurrent migrates a session found in an older format before a write
// handle uses it, updating sd to the new generation. The caller holds the
// session's lease.
func (s *Store) ensureCurrent(id string, sd *sessionDir) error {
	if sd.generation == "" || s.Format() == FormatV0 {
		return nil
	}
	if v, _ := generationVersion(filepath.Base(sd.generation)); v == wire.FormatVersion {
		return nil
	}
	_, err := s.migrateDir(id, sd, false)
	return err
}

// migrateDir converts the generation sd names into the current format. On
// success (not a dry run) sd names the new generation.
func (s *Store) migrateDir(id string, sd *sessionDir, dryRun bool) (*MigrationResult, error) {
	from := sd.generation
	r, err := s.scanFile(id, from)
	if err != nil {
		return nil, err
	}
	if r.header.Version != wire.FormatVersionV0 {
		return nil, &wire.StoreError{Code: CodeFormatUnsupported, SessionID: id, Path: from, Message: fmt.Sprintf(
			"session %q uses log format v%d, which this build cannot migrate (raw log: %s)", id, r.header.Version, from)}
	}
	events := append(r.events[:len(r.events):len(r.events)], r.recovered...)
	h, events, inherited, err := mapV0ToCurrent(id, from, r.header, events)
	if err != nil {
		return nil, err
	}
	to := filepath.Join(sd.dir, s.generationName())
	res := &MigrationResult{SessionID: id, From: filepath.Base(from), To: filepath.Base(to),
		FromVersion: wire.FormatVersionV0, ToVersion: wire.FormatVersion,
		Events: int64(len(events)), InheritedEventCount: inherited, DroppedBytes: r.size - r.committedBytes, DryRun: dryRun}
	if dryRun {
		return res, nil
	}
	content, err := s.encodeLog(h, events)
	if err != nil {
		return nil, err
	}
	rec := MigrationRecord{From: res.From, To: res.To, FromVersion: res.FromVersion, ToVersion: res.ToVersion,
		SourceSize: r.size, Events: res.Events, MigratedAt: s.now().UnixMilli()}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	// A record without its new generation is left by a migration that
	// failed before publishing; it describes nothing and is replaced.
	recPath := filepath.Join(sd.dir, migrationRecordFile)
	if err := s.fs.Remove(recPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := s.publish(sd.dir, migrationRecordFile, append(body, '\n')); err != nil {
		return nil, err
	}
	if err := s.publish(sd.dir, res.To, content); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, s.conflict(sd.dir, to, from, "the newer appeared while this migration ran")
		}
		return nil, err
	}
	s.log.Info(fmt.Sprintf("session-persistence-jsonl: session %q migrated from format v%d (%s) to v%d (%s); the old file is kept",
		id, res.FromVersion, res.From, res.ToVersion, res.To))
	sd.generation = to
	return res, nil
}

// mapV0ToCurrent maps a v0 header and its events to the current format.
// The v0 header's seedLength becomes isSeeded and the inherited count; as
// the current format carries that count only as an {"inherited":true}
// session/end-seed marker at seq = count, the harness's own fork marker (an
// end-seed with empty data at seq seedLength, or at seedLength-1 when the
// copied prefix already ended with one) gets that data. Replace surface
// operations are respelled for v3 (respelled); every other event is copied
// as it is.
func mapV0ToCurrent(id, path string, h wire.Header, events []session.Event) (wire.Header, []session.Event, int64, error) {
	h.Version = wire.FormatVersion
	seed := h.SeedLength
	h.SeedLength = 0
	events = respelled(events)
	if !h.IsSeeded {
		return h, events, 0, nil
	}
	at := int64(-1)
	for _, c := range []int64{seed, seed - 1} {
		if c >= 0 && c < int64(len(events)) && events[c].Type == wire.TypeEndSeed {
			at = c
			break
		}
	}
	if at < 0 {
		return h, nil, 0, &wire.StoreError{Code: CodeFormatUnsupported, SessionID: id, Path: path, Message: fmt.Sprintf(
			"session %q (format v0) inherits %d events but has no session/end-seed at seq %d or %d to carry that count in format v%d; it can be read but not migrated (raw log: %s)",
			id, seed, seed, seed-1, wire.FormatVersion, path)}
	}
	out := make([]session.Event, len(events))
	copy(out, events)
	out[at].Data = json.RawMessage(`{"inherited":true}`)
	return h, out, at, nil
}

// respelled returns events with every replace surface operation in the v3
// spelling {op, startSeq, endSeq}: the same range, so the same meaning
// (FORMAT.md §1.1). events is not modified; unchanged events are shared.
func respelled(events []session.Event) []session.Event {
	out := events
	for i, e := range events {
		if e.SurfaceOp == nil || e.SurfaceOp.Op != session.SurfaceReplace || e.SurfaceOp.Spelling == session.SpellingV3 {
			continue
		}
		if &out[0] == &events[0] {
			out = append([]session.Event(nil), events...)
		}
		op := *e.SurfaceOp
		op.Spelling = session.SpellingV3
		out[i].SurfaceOp = &op
	}
	return out
}

// encodeLog renders a whole log in this root's encoding: the header line
// (in the format of h.Version) and the events (raw), or a header frame and
// frames of whole lines of at most migrationFrameBytes each (zstd).
func (s *Store) encodeLog(h wire.Header, events []session.Event) ([]byte, error) {
	headerLine, err := encodeHeaderFor(h)
	if err != nil {
		return nil, err
	}
	body, err := encodeBatch(events)
	if err != nil {
		return nil, err
	}
	if s.comp != CompressionZstd {
		return append(headerLine, body...), nil
	}
	out := s.codec.encodeFrame(nil, headerLine)
	for len(body) > 0 {
		n := len(body)
		if n > migrationFrameBytes {
			n = migrationFrameBytes
			if i := bytes.LastIndexByte(body[:n], '\n'); i >= 0 {
				n = i + 1
			} else {
				n = bytes.IndexByte(body, '\n') + 1
			}
		}
		out = s.codec.encodeFrame(out, body[:n])
		body = body[n:]
	}
	return out, nil
}
