package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/session"
)

// Access is the access mode of a handle.
type Access string

// Access modes.
const (
	AccessRead  Access = "read"
	AccessWrite Access = "write"
)

// HandleRef identifies a handle independently of any process (SPEC 0.2): a
// write handle can be created by one worker and used or closed by another.
type HandleRef struct {
	// SessionID is the session the handle is for.
	SessionID string `json:"sessionId"`
	// HandleID is the caller-chosen, never reused handle id.
	HandleID string `json:"handleId"`
	// Access is read or write.
	Access Access `json:"access"`
}

// CreateOptions configures Store.Create.
type CreateOptions struct {
	// HandleID is the write handle's id, chosen by the caller (the workflow
	// generates it deterministically before the create activity runs).
	HandleID string
	// Owner is the workflow that owns the handle.
	Owner Owner
	// InheritedEventCount is the fork cut of a seeded session; it must be
	// positive exactly when the header is seeded.
	InheritedEventCount int64
}

// OpenOptions configures Store.Open.
type OpenOptions struct {
	// HandleID is the handle's id; required for write access.
	HandleID string
	// Owner is the workflow that owns a write handle.
	Owner Owner
	// Repair configures how a write open treats a damaged log.
	Repair RepairOptions
}

// handleState is the in-process view of one handle.
type handleState struct {
	ref       HandleRef
	header    session.Header
	inherited int64
	dir       string
	path      string // final generation path, even before materialization

	// write state
	materialized bool
	cursor       int64
	fi           os.FileInfo // identity of the file after our last scan or write
	size         int64       // its size then; meaningful while fi != nil
	logf         File        // the log opened for appending, kept across mutations
	lease        File        // the verified lease file, kept across mutations
	leaseFI      os.FileInfo // identity of that lease file
	torn         int64       // pending truncation offset, -1 when none
	forced       bool        // the pending cut removes valid records after damage
	force        bool        // RepairOptions.Force of the open
	recovered    []session.Event
	primed       []session.Event // validated log serving reads until the first append

	observed  int64
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Handle is an open session handle (SPEC 6.2). Methods are safe for
// concurrent use; operations on one session are serialized.
type Handle struct {
	s  *Store
	st *handleState
}

// Ref returns the process-independent identity of the handle.
func (h *Handle) Ref() HandleRef { return h.st.ref }

// ID is the session id.
func (h *Handle) ID() string { return h.st.ref.SessionID }

// Access is the handle's access mode.
func (h *Handle) Access() Access { return h.st.ref.Access }

// Header is the session header fixed at create or open.
func (h *Handle) Header() session.Header { return h.st.header }

// InheritedEventCount is the fork cut of the session.
func (h *Handle) InheritedEventCount() int64 { return h.st.inherited }

// NextSeq is the seq the next appended event must carry (write handles).
func (h *Handle) NextSeq() int64 { return h.st.cursor }

// Materialized reports whether the session has a log file.
func (h *Handle) Materialized() bool { return h.st.materialized }

// Create registers a new session and returns its write handle (SPEC 6.1).
// The session holds the write lease at once, recording the header in it, so
// any worker that presents the handle id can materialize it; nothing else is
// written until the first append or flush. Retrying Create with the same
// handle id returns the same handle.
func (s *Store) Create(ctx context.Context, h session.Header, opts CreateOptions) (*Handle, error) {
	if h.Version == 0 {
		h.Version = session.FormatVersion
	}
	if h.Version != session.FormatVersion {
		return nil, invalidArgument(h.ID, fmt.Errorf("session header version must be %d", session.FormatVersion))
	}
	if err := h.Validate(); err != nil {
		return nil, invalidArgument(h.ID, err)
	}
	count := opts.InheritedEventCount
	if h.IsSeeded && count == 0 {
		count = -1
	}
	if err := h.ValidateInheritedCount(count); err != nil {
		return nil, invalidArgument(h.ID, err)
	}
	h = s.rootHeader(h, opts.InheritedEventCount)
	if err := validHandleID(h.ID, opts.HandleID); err != nil {
		return nil, err
	}
	unlock, err := s.begin(ctx, h.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	id := h.ID
	dir, err := s.dirFor(h)
	if err != nil {
		return nil, invalidArgument(id, err)
	}
	if w := s.writerFor(id); w != nil && w.ref.HandleID == opts.HandleID {
		return &Handle{s: s, st: w}, nil
	}
	if err := s.checkRevoked(id, opts.HandleID); err != nil {
		return nil, err
	}
	sd, found, err := s.locate(id)
	if err == nil && !found {
		// Look again under the id's create lock, held until this creator's
		// lease is published (docs/DECISIONS.md D13).
		release, lerr := s.lockCreate(ctx, id)
		if lerr != nil {
			return nil, lerr
		}
		defer release()
		sd, found, err = s.locate(id)
	}
	if err != nil {
		return nil, err
	}
	if found {
		if sd.generation == "" && sd.dir == dir {
			if l, err := s.readLease(sd.dir); err == nil && l != nil && l.Handle == opts.HandleID && l.Pending != nil {
				return s.registerPending(id, dir, l), nil
			}
		}
		return nil, alreadyExists(id)
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if err := s.mkdirAll(dir); err != nil {
		return nil, err
	}
	lease := s.newLease(opts.HandleID, opts.Owner)
	lease.Pending = &PendingSession{Header: h, InheritedEventCount: opts.InheritedEventCount}
	if err := s.acquireLease(dir, lease); err != nil {
		if errors.Is(err, errLeaseHeld) {
			return nil, alreadyExists(id)
		}
		// Leave no residue: the session directory goes if it is empty (a
		// concurrent creator's entries keep it).
		if s.fs.Remove(dir) == nil {
			_ = s.syncDir(filepath.Dir(dir))
		}
		return nil, err
	}
	s.metrics.LeaseAcquired()
	// Re-check after acquiring: a close of this handle id may have landed
	// first (a zombie create). No creator can have published this id
	// elsewhere meanwhile (the create lock excludes them); the lookup is
	// repeated against a root shared with a store that takes no create lock.
	fail := func(err error) (*Handle, error) {
		s.releasePending(dir, opts.HandleID)
		return nil, err
	}
	if err := s.checkRevoked(id, opts.HandleID); err != nil {
		return fail(err)
	}
	sd, _, err = s.locate(id)
	if err != nil {
		return fail(err)
	}
	if sd.dir != dir || sd.generation != "" {
		return fail(alreadyExists(id))
	}
	return s.registerPending(id, dir, &lease), nil
}

func (s *Store) newLease(handle string, owner Owner) Lease {
	return Lease{Handle: handle, Owner: owner, Host: s.host, PID: s.pid, AcquiredAt: s.now().UnixMilli()}
}

func (s *Store) registerPending(id, dir string, l *Lease) *Handle {
	st := &handleState{
		ref:       HandleRef{SessionID: id, HandleID: l.Handle, Access: AccessWrite},
		header:    l.Pending.Header,
		inherited: l.Pending.InheritedEventCount,
		dir:       dir,
		path:      filepath.Join(dir, s.generationFor(l.Pending.Header)),
		torn:      -1,
	}
	s.setWriter(id, st)
	return &Handle{s: s, st: st}
}

// releasePending removes a pending session's lease and its directory.
func (s *Store) releasePending(dir, handle string) {
	ll, err := s.lockLease(context.Background(), dir)
	if err != nil || ll == nil {
		return
	}
	defer ll.release()
	if ll.lease.Handle == handle {
		s.dropLease(dir, true)
	}
}

// dropLease unlinks the lease (the caller holds its flock) and, for a
// session that never materialized, erases the session directory.
func (s *Store) dropLease(dir string, erase bool) error {
	if err := s.fs.Remove(filepath.Join(dir, leaseFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.metrics.LeaseReleased()
	if erase {
		if sd, err := s.inspectSessionDir(dir); err == nil && sd.generation == "" {
			_ = s.fs.Remove(filepath.Join(dir, summaryFile))
			_ = s.fs.Remove(dir)
			return s.syncDir(filepath.Dir(dir))
		}
	}
	return s.syncDir(dir)
}

func (s *Store) checkRevoked(id, handle string) error {
	r, err := s.isRevoked(handle)
	if err != nil {
		return err
	}
	if r {
		return revoked(id, handle)
	}
	return nil
}

// Open opens a session for reading or writing (SPEC 6.1). A write open claims
// ownership before it checks existence, takes the lease, validates the log
// and primes the handle with it; every failure releases what it took.
// Retrying a write open with the same handle id returns the same handle.
func (s *Store) Open(ctx context.Context, id string, access Access, opts OpenOptions) (*Handle, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	switch access {
	case AccessRead:
		return s.openRead(id, opts.HandleID)
	case AccessWrite:
		if err := validHandleID(id, opts.HandleID); err != nil {
			return nil, err
		}
		return s.openWrite(ctx, id, opts)
	}
	return nil, invalidArgument(id, fmt.Errorf("access must be %q or %q, got %q", AccessRead, AccessWrite, access))
}

func (s *Store) openRead(id, handle string) (*Handle, error) {
	st := &handleState{ref: HandleRef{SessionID: id, HandleID: handle, Access: AccessRead}, torn: -1}
	sd, found, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(id)
	}
	st.dir = sd.dir
	if sd.generation == "" {
		l, err := s.readLease(sd.dir)
		if err != nil {
			return nil, err
		}
		if l == nil || l.Pending == nil {
			return nil, notFound(id)
		}
		st.header, st.inherited = l.Pending.Header, l.Pending.InheritedEventCount
		return &Handle{s: s, st: st}, nil
	}
	r, err := s.scanFile(id, sd.generation)
	if err != nil {
		return nil, err
	}
	st.header, st.path, st.materialized = r.header, sd.generation, true
	st.inherited, err = inheritedCount(r.header, r.events)
	if err != nil {
		return nil, err
	}
	st.primed = append(r.events, r.recovered...)
	st.observed = int64(len(st.primed))
	return &Handle{s: s, st: st}, nil
}

func (s *Store) openWrite(ctx context.Context, id string, opts OpenOptions) (*Handle, error) {
	// 1. In-process claim first, before any existence check.
	if w := s.writerFor(id); w != nil {
		if w.ref.HandleID == opts.HandleID {
			return &Handle{s: s, st: w}, nil
		}
		if s.leaseNames(w.dir, w.ref.HandleID) {
			return nil, alreadyOwned(id)
		}
		s.dropWriter(w)
	}
	if err := s.checkRevoked(id, opts.HandleID); err != nil {
		return nil, err
	}
	// 2. Locate.
	sd, found, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(id)
	}
	if sd.generation == "" {
		return nil, alreadyOwned(id) // a pending creator owns it
	}
	// 3. Lease.
	lease := s.newLease(opts.HandleID, opts.Owner)
	if err := s.acquireLease(sd.dir, lease); err != nil {
		if !errors.Is(err, errLeaseHeld) {
			return nil, err
		}
		l, rerr := s.readLease(sd.dir)
		if rerr != nil || l == nil || l.Handle != opts.HandleID {
			return nil, alreadyOwned(id)
		}
		// A retried open whose first attempt took the lease: continue.
	} else {
		s.metrics.LeaseAcquired()
	}
	st, err := s.primeWriter(ctx, id, sd, opts.HandleID, opts.Repair.Force)
	if err != nil {
		if rerr := s.releaseLease(sd.dir, opts.HandleID); rerr != nil {
			return nil, &AggregateError{Message: fmt.Sprintf("session %q: write open failed and its lock release failed", id), Errors: []error{err, rerr}}
		}
		return nil, err
	}
	s.setWriter(id, st)
	return &Handle{s: s, st: st}, nil
}

// primeWriter validates the log under a freshly taken lease.
func (s *Store) primeWriter(ctx context.Context, id string, sd sessionDir, handle string, force bool) (*handleState, error) {
	if err := s.checkRevoked(id, handle); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if err := s.ensureCurrent(id, &sd); err != nil {
		return nil, err
	}
	st := &handleState{ref: HandleRef{SessionID: id, HandleID: handle, Access: AccessWrite}, dir: sd.dir, path: sd.generation, force: force}
	if err := s.loadFile(st); err != nil {
		return nil, err
	}
	return st, nil
}

// loadFile (re)scans a write handle's log and resets its cursor and repair
// state from it.
func (s *Store) loadFile(st *handleState) error {
	fi, err := s.fs.Lstat(st.path)
	if err != nil {
		return err
	}
	r, err := s.scanFileForce(st.ref.SessionID, st.path, st.force)
	if err != nil {
		return err
	}
	if pending := st.recovered; len(pending) > 0 && len(r.recovered) == 0 && r.tornTruncateTo < 0 && int64(len(r.events)) == pending[0].Seq {
		// A repair by this handle cut the torn frame but failed before it
		// re-wrote the records recovered from it: they exist only here now.
		r.recovered = pending
	}
	inherited, err := inheritedCount(r.header, append(r.events[:len(r.events):len(r.events)], r.recovered...))
	if err != nil {
		return err
	}
	st.releaseLog()
	st.header, st.inherited, st.materialized, st.fi, st.size = r.header, inherited, true, fi, fi.Size()
	st.primed = append(r.events, r.recovered...)
	st.recovered, st.torn, st.forced = r.recovered, r.tornTruncateTo, r.forcedCut
	st.cursor = int64(len(st.primed))
	st.observed = max(st.observed, st.cursor)
	if fi.Size() != r.size {
		// The file changed between stat and read; the next mutation re-checks.
		st.fi = nil
	}
	return nil
}

// releaseLease removes the lease if it names handle.
func (s *Store) releaseLease(dir, handle string) error {
	ll, err := s.lockLease(context.Background(), dir)
	if err != nil || ll == nil {
		return err
	}
	defer ll.release()
	if ll.lease.Handle != handle {
		return nil
	}
	return s.dropLease(dir, false)
}

func (s *Store) leaseNames(dir, handle string) bool {
	l, err := s.readLease(dir)
	return err != nil || (l != nil && l.Handle == handle)
}

func (s *Store) writerFor(id string) *handleState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writers[id]
}

func (s *Store) dropWriter(st *handleState) {
	s.mu.Lock()
	if s.writers[st.ref.SessionID] == st {
		delete(s.writers, st.ref.SessionID)
	}
	s.mu.Unlock()
	st.releaseFiles()
}

// setWriter records the session's write handle state in this process,
// releasing the descriptors of a state it replaces. The caller holds the
// session's slot.
func (s *Store) setWriter(id string, st *handleState) {
	s.mu.Lock()
	old := s.writers[id]
	s.writers[id] = st
	s.mu.Unlock()
	if old != nil && old != st {
		old.releaseFiles()
	}
}

// Attach returns a handle for ref in this process, for a handle opened or
// created elsewhere (another activity attempt, another worker). Its state is
// loaded from storage by the first operation, which also verifies that the
// lease still names the handle.
func (s *Store) Attach(ref HandleRef) *Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.writers[ref.SessionID]; w != nil && w.ref == ref {
		return &Handle{s: s, st: w}
	}
	return &Handle{s: s, st: &handleState{ref: ref, torn: -1}}
}

// writer resolves a write handle's state under its session slot, loading it
// from the lease and the log when this process has not seen it.
func (h *Handle) writer(ctx context.Context, op string) (*handleState, error) {
	st := h.st
	if st.closed.Load() {
		return nil, handleClosed(st.ref.SessionID, op)
	}
	s := h.s
	if w := s.writerFor(st.ref.SessionID); w != nil && w.ref.HandleID == st.ref.HandleID {
		h.st = w
		return w, nil
	}
	id := st.ref.SessionID
	if r, err := s.isRevoked(st.ref.HandleID); err != nil {
		return nil, err
	} else if r {
		st.closed.Store(true)
		return nil, handleClosed(id, op)
	}
	sd, found, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ownershipLost(id)
	}
	l, err := s.readLease(sd.dir)
	if err != nil {
		return nil, err
	}
	if l == nil || l.Handle != st.ref.HandleID {
		return nil, ownershipLost(id)
	}
	nst := &handleState{ref: st.ref, dir: sd.dir, torn: -1, observed: st.observed}
	if sd.generation == "" {
		if l.Pending == nil {
			return nil, ownershipLost(id)
		}
		nst.header, nst.inherited = l.Pending.Header, l.Pending.InheritedEventCount
		nst.path = filepath.Join(sd.dir, s.generationFor(nst.header))
	} else {
		if err := s.ensureCurrent(id, &sd); err != nil {
			return nil, err
		}
		nst.path = sd.generation
		if err := s.loadFile(nst); err != nil {
			return nil, err
		}
	}
	s.setWriter(id, nst)
	h.st = nst
	return nst, nil
}

// refresh re-reads the log when another process (a retried activity attempt
// holding the same handle) changed it since this process last saw it.
func (s *Store) refresh(st *handleState) error {
	fi, err := s.fs.Lstat(st.path)
	if errors.Is(err, fs.ErrNotExist) && !st.materialized {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.materialized {
		if err := s.checkOwnLog(st); err != nil {
			return err
		}
	}
	if st.materialized && st.fi != nil && os.SameFile(fi, st.fi) && fi.Size() == st.size {
		return nil
	}
	return s.loadFile(st)
}

// Read returns events [offset, offset+length) of the log; length < 0 means
// all (SPEC 6.2). A write handle serves what it knows; a read handle re-reads
// the current artifact. The result is the caller's own copy.
func (h *Handle) Read(ctx context.Context, offset, length int64) ([]session.Event, error) {
	id := h.st.ref.SessionID
	if h.st.closed.Load() {
		return nil, handleClosed(id, "read")
	}
	if offset < 0 || offset > session.MaxSafeInteger {
		return nil, invalidArgument(id, fmt.Errorf("read offset must be a non-negative safe integer, got %d", offset))
	}
	if length > session.MaxSafeInteger {
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
	st := h.st
	if n := int64(len(events)); n < st.observed {
		return nil, &Error{Code: CodeCorrupt, SessionID: id, Path: st.path, Message: fmt.Sprintf(
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
	s, id := h.s, h.st.ref.SessionID
	if h.st.ref.Access == AccessWrite {
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
	st := h.st
	sd, found, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(id)
	}
	if sd.generation == "" {
		if l, err := s.readLease(sd.dir); err != nil {
			return nil, err
		} else if l == nil || l.Pending == nil {
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

// Append durably appends a batch (SPEC 6.2): the batch is validated and
// copied at call time; seqs must continue the log exactly. A pending torn
// tail is cut first, inside the same mutation. Re-appending a batch the log
// already holds at exactly these seqs succeeds without writing, which makes
// a retried append activity safe. When Append returns nil the batch has been
// fsynced.
func (h *Handle) Append(ctx context.Context, events []session.Event) error {
	id := h.st.ref.SessionID
	if h.st.closed.Load() {
		return handleClosed(id, "append")
	}
	batch, err := session.SnapshotBatch(events)
	if err != nil {
		return invalidArgument(id, err)
	}
	if h.st.ref.Access != AccessWrite {
		return readOnly(id, "append")
	}
	if len(batch) == 0 {
		return nil
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := h.writer(ctx, "append")
	if err != nil {
		return err
	}
	err = s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		if batch[0].Seq < st.cursor {
			if ok, err := s.alreadyStored(st, batch); err != nil || ok {
				return err
			}
		}
		if err := session.CheckContiguous(id, st.cursor, batch); err != nil {
			return &Error{Code: CodeSeqMismatch, SessionID: id, Message: err.Error(), Err: err}
		}
		// What is accepted must stay readable, repairable and resumable.
		if err := session.CheckAppendable(st.header, st.cursor, batch); err != nil {
			return invalidArgument(id, err)
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		return s.write(st, batch)
	})
	if err != nil {
		return err
	}
	s.touchSummary(st.dir)
	return nil
}

// alreadyStored reports whether the log holds exactly batch at its seqs.
func (s *Store) alreadyStored(st *handleState, batch []session.Event) (bool, error) {
	first, n := batch[0].Seq, int64(len(batch))
	if first+n > st.cursor {
		return false, nil
	}
	stored := st.primed
	if stored == nil {
		r, err := s.scanFile(st.ref.SessionID, st.path)
		if err != nil {
			return false, err
		}
		stored = r.events
	}
	if first+n > int64(len(stored)) {
		return false, nil
	}
	for i, e := range batch {
		a, err := e.MarshalJSON()
		if err != nil {
			return false, err
		}
		b, err := stored[first+int64(i)].MarshalJSON()
		if err != nil || !bytes.Equal(a, b) {
			return false, err
		}
	}
	return true, nil
}

// write performs one append mutation under the lease: pending repair first,
// then materialization or an append with rollback.
func (s *Store) write(st *handleState, batch []session.Event) error {
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
	st.observed = max(st.observed, st.cursor)
	return nil
}

// repair cuts a pending torn (or forced) suffix, after copying it to a
// quarantine file beside the log, and re-writes zstd-recovered records as
// their own frame. State is cleared only after success. It returns the cut
// made, or nil.
func (s *Store) repair(st *handleState) (*TailCut, error) {
	var cut *TailCut
	if st.torn >= 0 {
		q, err := s.quarantine(st.path, st.torn)
		if err != nil {
			return nil, err
		}
		fi, err := s.fs.Stat(st.path)
		if err != nil {
			return nil, err
		}
		if err := s.truncate(st.path, st.torn); err != nil {
			return nil, err
		}
		cut = &TailCut{Offset: st.torn, Bytes: fi.Size() - st.torn, Quarantine: q, Forced: st.forced}
		st.torn, st.forced = -1, false
		st.fi = nil // re-read by the next append
		st.releaseLog()
		s.metrics.TornTailRepaired()
		if cut.Forced {
			s.log.Warn(fmt.Sprintf("session-persistence-jsonl: session %q: a forced repair cut the log at its first damage; the %d bytes removed, valid records included, were saved to %s", st.ref.SessionID, cut.Bytes, q),
				"session", st.ref.SessionID, "path", st.path, "quarantine", q)
		} else {
			s.log.Warn(fmt.Sprintf("session-persistence-jsonl: session %q recovered from a torn tail; incomplete tail bytes were discarded", st.ref.SessionID),
				"session", st.ref.SessionID, "path", st.path, "quarantine", q)
		}
	}
	if len(st.recovered) > 0 {
		body, err := encodeBatch(st.recovered)
		if err != nil {
			return cut, err
		}
		if err := s.appendData(st, s.codec.encodeFrame(nil, body)); err != nil {
			return cut, err
		}
		st.recovered = nil
	}
	return cut, nil
}

func (s *Store) truncate(path string, size int64) error {
	f, _, err := s.openFile(path, os.O_RDWR)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = s.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) sync(f File) error {
	start := time.Now()
	err := f.Sync()
	s.metrics.Fsync(time.Since(start))
	return err
}

// appendData appends body at EOF and fsyncs; on failure the file is cut back
// to its previous size. The descriptor stays open for later appends.
func (s *Store) appendData(st *handleState, body []byte) error {
	if st.logf == nil {
		f, _, err := s.openFile(st.path, os.O_WRONLY|os.O_APPEND)
		if err != nil {
			return err
		}
		st.logf = f
	}
	old := st.size
	if st.fi == nil {
		fi, err := st.logf.Stat()
		if err != nil {
			st.releaseLog()
			return err
		}
		st.fi, old = fi, fi.Size()
	}
	_, err := st.logf.Write(body)
	if err == nil {
		err = s.sync(st.logf)
	}
	if err != nil {
		st.releaseLog()
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

// releaseLog closes the cached log descriptor.
func (st *handleState) releaseLog() {
	if st.logf != nil {
		_ = st.logf.Close()
		st.logf = nil
	}
}

// releaseFiles closes every descriptor the handle keeps.
func (st *handleState) releaseFiles() {
	st.releaseLog()
	if st.lease != nil {
		_ = st.lease.Close()
		st.lease, st.leaseFI = nil, nil
	}
}

// withWriterLease runs fn under the lease's mutation lock, verifying that the
// lease still names the handle. The verified lease descriptor is kept: lease
// files are published whole and never rewritten, so while the path still
// names the same inode it still names this handle, and later mutations need
// only flock and one stat.
func (s *Store) withWriterLease(ctx context.Context, st *handleState, fn func() error) error {
	path := filepath.Join(st.dir, leaseFile)
	if st.lease != nil {
		if err := s.flock(ctx, st.lease); err != nil {
			return err
		}
		pi, err := s.fs.Lstat(path)
		if err == nil && os.SameFile(pi, st.leaseFI) {
			defer st.unlockLease()
			return fn()
		}
		_ = st.lease.Flock(unix.LOCK_UN)
		_ = st.lease.Close()
		st.lease, st.leaseFI = nil, nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	ll, err := s.lockLease(ctx, st.dir)
	if err != nil {
		return err
	}
	if ll == nil {
		return ownershipLost(st.ref.SessionID)
	}
	if ll.lease.Handle != st.ref.HandleID {
		ll.release()
		return ownershipLost(st.ref.SessionID)
	}
	fi, err := ll.f.Stat()
	if err != nil {
		ll.release()
		return err
	}
	st.lease, st.leaseFI = ll.f, fi
	defer st.unlockLease()
	return fn()
}

// unlockLease releases the mutation lock; if unlocking fails, closing the
// descriptor releases it.
func (st *handleState) unlockLease() {
	if err := st.lease.Flock(unix.LOCK_UN); err != nil {
		_ = st.lease.Close()
		st.lease, st.leaseFI = nil, nil
	}
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
// publishes a header-only log (SPEC 6.2). Otherwise it is a no-op, since
// every append is already fsynced.
func (h *Handle) Flush(ctx context.Context) error {
	id := h.st.ref.SessionID
	if h.st.closed.Load() {
		return handleClosed(id, "flush")
	}
	if h.st.ref.Access != AccessWrite {
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

// Close releases the handle (SPEC 6.2, 0.2). It is idempotent and not
// cancellable: the handle id is recorded as revoked, the lease is removed if
// it names the handle, and a session that never materialized is erased.
// Ownership is released even when Close reports an error.
func (h *Handle) Close(ctx context.Context) error {
	st := h.st
	st.closeOnce.Do(func() {
		st.closeErr = h.s.CloseHandle(context.WithoutCancel(ctx), st.ref)
		st.closed.Store(true)
	})
	return st.closeErr
}

// CloseHandle closes a handle by reference, whether or not this process
// opened it and whether or not its open ever completed. It records the
// handle id as revoked, so an open that lands later fails and releases what
// it took, then removes the lease if it names the handle.
func (s *Store) CloseHandle(ctx context.Context, ref HandleRef) error {
	id := ref.SessionID
	if err := session.ValidateID(id); err != nil {
		return invalidArgument(id, err)
	}
	unlock, err := s.lockSession(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	w := s.writers[id]
	if w != nil && w.ref.HandleID == ref.HandleID {
		w.closed.Store(true)
		delete(s.writers, id)
	} else {
		w = nil
	}
	s.mu.Unlock()
	if w != nil {
		w.releaseFiles()
		s.mu.Lock()
		delete(s.touched, w.dir)
		s.mu.Unlock()
	}
	if ref.Access == AccessRead || ref.HandleID == "" {
		return nil
	}
	// Revoke first, so that an open of this handle id landing later fails;
	// then release the lease wherever it names the handle, whatever else is
	// found; report the other problems last.
	var errs []error
	if err := s.revoke(id, ref.HandleID); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.releaseEverywhere(ctx, id, ref.HandleID)...)
	if len(errs) == 0 {
		if _, _, err := s.locate(id); isDuplicate(err) {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &AggregateError{Message: fmt.Sprintf("session %q: close failed", id), Errors: errs}
}

// releaseEverywhere removes the lease naming handle from every session
// directory of id, the session directory too when it never materialized.
// Unlike a lookup it does not stop at a damaged or duplicate directory of
// the id: a close releases what it holds whatever else it finds.
func (s *Store) releaseEverywhere(ctx context.Context, id, handle string) []error {
	seg, err := EncodeSegment(id)
	if err != nil {
		return []error{invalidArgument(id, err)}
	}
	projects, _, err := s.rootEntries()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, p := range projects {
		dir := filepath.Join(p, seg)
		if err := s.checkSessionDir(id, dir); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrLayout) {
				errs = append(errs, err)
			}
			continue // no directory this store could have leased
		}
		ll, err := s.lockLease(ctx, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ll == nil {
			continue
		}
		if ll.lease.Handle == handle {
			sd, err := s.inspectSessionDir(dir)
			erase := err == nil && sd.generation == ""
			if err := s.dropLease(dir, erase); err != nil {
				errs = append(errs, err)
			}
		}
		ll.release()
	}
	return errs
}
