package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Read returns events [offset, offset+length) of the log; length < 0 means
// all (FORMAT.md §7.4). A write handle serves what it knows; a read handle re-reads
// the current artifact. The result is the caller's own copy.
func (h *Handle) Read(ctx context.Context, offset, length int64) ([]session.Event, error) {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return nil, handleClosed(id, "read")
	}
	if offset < 0 || offset > wire.MaxSafeInteger {
		return nil, invalidArgument(id, fmt.Errorf("read offset must be a non-negative safe integer, got %d", offset))
	}
	if length > wire.MaxSafeInteger {
		return nil, invalidArgument(id, fmt.Errorf("read length must be a non-negative safe integer, got %d", length))
	}
	unlock, err := h.s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	events, err := h.current(ctx)
	if err != nil {
		return nil, err
	}
	st := h.state()
	if n := int64(len(events)); n < st.observed {
		return nil, &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: st.path, Message: fmt.Sprintf(
			"session %q: stored log shrank below a previously observed prefix (%d < %d)", id, n, st.observed)}
	}
	st.observed = int64(len(events))
	if offset >= int64(len(events)) {
		return []session.Event{}, nil
	}
	end := int64(len(events))
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	return session.CloneEvents(events[offset:end]), nil
}

// current returns the whole validated log as the handle sees it now.
func (h *Handle) current(ctx context.Context) ([]session.Event, error) {
	s, id := h.s, h.ref.SessionID
	if h.ref.Access == AccessWrite {
		st, err := h.writer(ctx, "read")
		if err != nil {
			return nil, err
		}
		if !st.materialized {
			return nil, nil
		}
		if st.primed == nil {
			if err := s.loadFile(st); err != nil {
				return nil, err
			}
		}
		return st.primed, nil
	}
	st := h.state()
	sd, err := s.locateStored(id)
	if err != nil {
		return nil, err
	}
	if sd.generation == "" {
		if l, err := s.pendingLease(sd); err != nil {
			return nil, err
		} else if l == nil {
			return nil, notFound(id)
		}
		return nil, nil
	}
	if st.primed != nil && st.path == sd.generation {
		if fi, err := s.fs.Lstat(sd.generation); err == nil && st.fi != nil && os.SameFile(fi, st.fi) && fi.Size() == st.size {
			return st.primed, nil
		}
	}
	fi, err := s.fs.Lstat(sd.generation)
	if err != nil {
		return nil, err
	}
	r, err := s.scanFile(id, sd.generation)
	if err != nil {
		return nil, err
	}
	st.path, st.fi, st.size = sd.generation, fi, fi.Size()
	st.primed = append(r.events, r.recovered...)
	return st.primed, nil
}

// Append durably appends a batch (FORMAT.md §7.5): the batch is validated and
// copied at call time; seqs must continue the log exactly. A pending torn
// tail is cut first, inside the same mutation. Re-appending a batch the log
// already holds at exactly these seqs succeeds without writing, which makes
// a retried append activity safe. When Append returns nil the batch has been
// fsynced.
func (h *Handle) Append(ctx context.Context, events []session.Event) error {
	_, err := h.append(ctx, events, appendExact, 0)
	return err
}

// AppendRerun is Append for a store that may run again with a batch built
// anew (FORMAT.md §4.6): a local activity that its workflow task ran once
// already, in an attempt whose outcome was never recorded, stamps a later
// `time` on the same events and may add events after them. The events of
// the batch that the log already holds at their seqs must equal the stored
// ones in every field but `time`; they are not written again, and the
// events after them are appended. Any other difference is SeqMismatch, as
// for Append.
func (h *Handle) AppendRerun(ctx context.Context, events []session.Event) error {
	_, err := h.append(ctx, events, appendRerun, 0)
	return err
}

// AppendReconcile is AppendRerun for a batch whose content an earlier,
// unrecorded run of its builder may have chosen otherwise (FORMAT.md §4.6):
// a turn's batch that claims the inputs its workflow task admitted, which a
// retried task admits in another grouping. When the log's events from the
// batch's first seq up to the cursor are the batch's head (equal but for
// `time`), the rest is appended and held is nil, as by AppendRerun.
// Otherwise nothing is written and held is a copy of those stored events,
// for the caller to adopt; more than maxHeld of them is SeqMismatch.
func (h *Handle) AppendReconcile(ctx context.Context, events []session.Event, maxHeld int) (held []session.Event, err error) {
	return h.append(ctx, events, appendReconcile, maxHeld)
}

// appendMode is how append treats a batch that starts below the cursor.
type appendMode int

const (
	// appendExact: only a batch wholly held, exactly, is accepted.
	appendExact appendMode = iota
	// appendRerun: the held head must equal but for time; the rest is
	// appended.
	appendRerun
	// appendReconcile: as appendRerun, and other held events are returned
	// instead of refused.
	appendReconcile
)

func (h *Handle) append(ctx context.Context, events []session.Event, mode appendMode, maxHeld int) ([]session.Event, error) {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return nil, handleClosed(id, "append")
	}
	batch, err := session.SnapshotBatch(events)
	if err != nil {
		return nil, invalidArgument(id, err)
	}
	if h.ref.Access != AccessWrite {
		return nil, readOnly(id, "append")
	}
	if len(batch) == 0 {
		return nil, nil
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := h.writer(ctx, "append")
	if err != nil {
		return nil, err
	}
	var held []session.Event
	err = s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		spellFor(st.header, batch)
		if batch[0].Seq < st.cursor {
			n, err := s.storedMatch(st, batch, mode != appendExact)
			if err != nil {
				return err
			}
			if mode == appendReconcile && n == 0 {
				held, err = s.heldFrom(st, batch[0].Seq, maxHeld)
				if err != nil || held != nil {
					return err
				}
			}
			if n == len(batch) {
				if mode == appendReconcile && batch[0].Seq+int64(n) < st.cursor {
					// The batch is held and more after it: the caller
					// adopts the whole held run.
					held, err = s.heldFrom(st, batch[0].Seq, maxHeld)
					if err != nil || held != nil {
						return err
					}
				}
				return nil
			}
			if mode != appendExact {
				batch = batch[n:]
			}
		}
		return s.appendChecked(ctx, st, batch)
	})
	if err != nil {
		return nil, err
	}
	if held == nil {
		s.touchSummary(st.dir)
	}
	return held, nil
}

// heldFrom returns a copy of the stored events from seq first to the
// cursor, or nil (and the caller's contiguity check refuses the batch)
// when first is not below the cursor or they are more than maxHeld.
func (s *Store) heldFrom(st *handleState, first int64, maxHeld int) ([]session.Event, error) {
	if first < 0 || first >= st.cursor || st.cursor-first > int64(maxHeld) {
		return nil, nil
	}
	stored, err := s.storedEvents(st)
	if err != nil {
		return nil, err
	}
	if int64(len(stored)) < st.cursor {
		return nil, nil
	}
	return session.CloneEvents(stored[first:st.cursor]), nil
}

// storedMatch returns how many leading events of batch the log holds at
// their seqs, when every event of batch below the cursor is so held: equal
// in canonical form (FORMAT.md §1.4), or, with ignoreTime, equal but for
// `time`. Otherwise it returns 0, and the contiguity check refuses the
// batch. A whole batch held (the result is len(batch)) is an idempotent
// re-append.
func (s *Store) storedMatch(st *handleState, batch []session.Event, ignoreTime bool) (int, error) {
	first := batch[0].Seq
	if !ignoreTime && first+int64(len(batch)) > st.cursor {
		return 0, nil // only a whole batch held is a re-append
	}
	overlap := min(int64(len(batch)), st.cursor-first)
	stored, err := s.storedEvents(st)
	if err != nil {
		return 0, err
	}
	if first+overlap > int64(len(stored)) {
		return 0, nil
	}
	for i := range overlap {
		e := batch[i]
		if ignoreTime {
			e.Time = stored[first+i].Time
		}
		a, err := e.MarshalJSON()
		if err != nil {
			return 0, err
		}
		b, err := stored[first+i].MarshalJSON()
		if err != nil || !bytes.Equal(a, b) {
			return 0, err
		}
	}
	return int(overlap), nil
}

// storedEvents is the validated log of a write handle: the events it holds
// in memory, or the file scanned again.
func (s *Store) storedEvents(st *handleState) ([]session.Event, error) {
	if st.primed != nil {
		return st.primed, nil
	}
	r, err := s.scanFile(st.ref.SessionID, st.path)
	if err != nil {
		return nil, err
	}
	return r.events, nil
}

// appendChecked validates batch as the continuation of the log (its seqs
// and FORMAT.md §1.5, §4.6) and writes it. The caller holds the lease and
// has refreshed the handle.
func (s *Store) appendChecked(ctx context.Context, st *handleState, batch []session.Event) error {
	id := st.ref.SessionID
	if err := session.CheckContiguous(id, st.cursor, batch); err != nil {
		return &wire.StoreError{Code: CodeSeqMismatch, SessionID: id, Message: err.Error(), Err: err}
	}
	// What is accepted must stay readable, repairable and resumable.
	if err := session.CheckAppendable(st.header, st.cursor, batch); err != nil {
		return invalidArgument(id, err)
	}
	if st.header.Version == wire.FormatVersionV0 {
		// ... and, in a v0 log, loadable by the harness (FORMAT.md §8.2).
		if err := s.checkHarnessBatch(st, batch); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	return s.write(st, batch)
}

// write performs one append mutation under the lease: pending repair first,
// then materialization or an append with rollback. When the handle held the
// whole log in memory before, it holds the log with the batch afterwards,
// so the next operation need not re-read the file.
func (s *Store) write(st *handleState, batch []session.Event) error {
	prior := st.primed
	known := int64(len(prior)) == st.cursor && (prior != nil || !st.materialized)
	body, err := encodeBatch(batch)
	if err != nil {
		return invalidArgument(st.ref.SessionID, err)
	}
	if !st.materialized {
		if err := s.materialize(st, body); err != nil {
			return err
		}
	} else {
		if _, err := s.repair(st); err != nil {
			return err
		}
		if s.comp == CompressionZstd {
			body = s.codec.encodeFrame(nil, body)
		}
		if err := s.appendData(st, body); err != nil {
			return err
		}
	}
	st.cursor += int64(len(batch))
	st.primed = nil
	if known && st.fi != nil {
		// In place: whoever reads primed does so under the session's
		// slot and copies it or caps its capacity (Read, Update).
		st.primed = append(prior, batch...)
	}
	st.observed = max(st.observed, st.cursor)
	return nil
}

func (s *Store) sync(f File) error {
	start := time.Now()
	err := f.Sync()
	s.metrics.Fsync(time.Since(start))
	return err
}

// syncData makes an append to f durable: the appended bytes and the file's
// new size, with fdatasync(2) when f is a DataSyncer (the file's times are
// not needed to read the log back), else with Sync.
func (s *Store) syncData(f File) error {
	d, ok := f.(DataSyncer)
	if !ok {
		return s.sync(f)
	}
	start := time.Now()
	err := d.SyncData()
	s.metrics.Fsync(time.Since(start))
	return err
}

// appendData appends body at EOF and makes it durable (syncData); on failure
// the file is cut back to its previous size. The descriptor stays open for
// later appends.
func (s *Store) appendData(st *handleState, body []byte) error {
	if st.logf == nil {
		if err := s.reopenLog(st); err != nil {
			return err
		}
	}
	old := st.size
	if st.fi == nil {
		fi, err := st.logf.Stat()
		if err != nil {
			s.releaseLog(st)
			return err
		}
		st.fi, old = fi, fi.Size()
	}
	_, err := st.logf.Write(body)
	if err == nil {
		err = s.syncData(st.logf)
	}
	if err != nil {
		s.releaseLog(st)
		st.fi = nil
		if rerr := s.truncate(st.path, old); rerr != nil {
			return &AggregateError{Message: fmt.Sprintf("failed to roll back append to %q", st.path), Errors: []error{err, rerr}}
		}
		return err
	}
	s.metrics.BytesWritten(len(body))
	st.size = old + int64(len(body))
	return nil
}

// reopenLog opens st's log for appending, within the descriptor limit. When
// the handle knows the file it last wrote or scanned (st.fi), the opened
// descriptor must name that file at that size: a log replaced or grown by
// another writer since, which the caller's refresh under the lease did not
// see, is reported as lost ownership and re-read by the next mutation,
// never appended to.
func (s *Store) reopenLog(st *handleState) error {
	s.makeRoom(st)
	f, fi, err := s.openFile(st.path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return err
	}
	if st.fi != nil && (!os.SameFile(fi, st.fi) || fi.Size() != st.size) {
		_ = f.Close()
		st.fi, st.primed = nil, nil
		return &wire.StoreError{Code: CodeOwnershipLost, SessionID: st.ref.SessionID, Path: st.path, Message: fmt.Sprintf(
			"session %q: the log changed under the lease since this handle last saw it; close this handle and reopen", st.ref.SessionID)}
	}
	st.logf = f
	s.fdOpened(st)
	return nil
}

// materialize publishes the first content of a session: header plus batch
// (raw), or a header frame plus a batch frame (zstd), through an exclusive
// temp file, fsync, a no-overwrite link and a directory fsync.
func (s *Store) materialize(st *handleState, batch []byte) error {
	id := st.ref.SessionID
	sd, err := s.inspectSessionDir(st.dir)
	if err != nil {
		return err
	}
	if sd.generation != "" {
		return refuseMaterialize(id, sd.generation, st.header.Version)
	}
	headerLine, err := encodeHeaderFor(st.header)
	if err != nil {
		return err
	}
	var content []byte
	if s.comp == CompressionZstd {
		content = s.codec.encodeFrame(nil, headerLine)
		if len(batch) > 0 {
			content = s.codec.encodeFrame(content, batch)
		}
	} else {
		content = append(headerLine, batch...)
	}
	start := time.Now()
	if err := s.publish(st.dir, s.generationFor(st.header), content); err != nil {
		return err
	}
	s.metrics.Fsync(time.Since(start))
	s.metrics.BytesWritten(len(content))
	st.path = filepath.Join(st.dir, s.generationFor(st.header))
	st.materialized = true
	if fi, err := s.fs.Lstat(st.path); err == nil {
		st.fi, st.size = fi, fi.Size()
	} else {
		st.fi = nil
	}
	return nil
}

// Flush makes a created session durable: when nothing was written yet it
// publishes a header-only log (FORMAT.md §7.6). Otherwise it is a no-op, since
// every append is already fsynced.
func (h *Handle) Flush(ctx context.Context) error {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return handleClosed(id, "flush")
	}
	if h.ref.Access != AccessWrite {
		return readOnly(id, "flush")
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := h.writer(ctx, "flush")
	if err != nil {
		return err
	}
	if st.materialized {
		return nil
	}
	return s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil || st.materialized {
			return err
		}
		return s.materialize(st, nil)
	})
}
