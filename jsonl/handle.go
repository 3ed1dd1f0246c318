package jsonl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

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
	// Cut configures how a write open cuts a damaged log (FORMAT.md §5.1,
	// §5.2).
	Cut CutOptions
}

// handleState is the in-process view of one handle.
type handleState struct {
	ref       HandleRef
	header    wire.Header
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
	force        bool        // CutOptions.Force of the open
	recovered    []session.Event
	primed       []session.Event // the validated log held in memory; appends extend it

	observed  int64
	held      int           // kept descriptors, counted by the store's descriptorBudget
	elem      *list.Element // place in the budget's LRU while held > 0
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Handle is an open session handle (FORMAT.md §7.3). Methods are safe for
// concurrent use; operations on one session are serialized.
type Handle struct {
	s   *Store
	ref HandleRef // fixed for the handle's life
	// st is the handle's state. The first operation of an attached handle
	// replaces it, under the session's slot, with the state loaded from
	// storage or shared with this process's write handle.
	st atomic.Pointer[handleState]
}

// newHandle returns a handle over st.
func (s *Store) newHandle(st *handleState) *Handle {
	h := &Handle{s: s, ref: st.ref}
	h.st.Store(st)
	return h
}

// state is the handle's current state. Fields that operations change are
// read under the session's slot (see locked).
func (h *Handle) state() *handleState { return h.st.Load() }

// locked returns the handle's state read under the session's slot, so that
// it does not interleave with an operation on the session in this Store.
func locked[T any](h *Handle, get func(st *handleState) T) T {
	unlock, _ := h.s.lockSession(context.Background(), h.ref.SessionID) // never fails without a deadline
	defer unlock()
	return get(h.state())
}

// Ref returns the process-independent identity of the handle.
func (h *Handle) Ref() HandleRef { return h.ref }

// ID is the session id.
func (h *Handle) ID() string { return h.ref.SessionID }

// Access is the handle's access mode.
func (h *Handle) Access() Access { return h.ref.Access }

// Header is the session header fixed at create or open.
func (h *Handle) Header() wire.Header {
	return locked(h, func(st *handleState) wire.Header { return st.header })
}

// InheritedEventCount is the fork cut of the session.
func (h *Handle) InheritedEventCount() int64 {
	return locked(h, func(st *handleState) int64 { return st.inherited })
}

// NextSeq is the seq the next appended event must carry (write handles).
func (h *Handle) NextSeq() int64 {
	return locked(h, func(st *handleState) int64 { return st.cursor })
}

// Materialized reports whether the session has a log file.
func (h *Handle) Materialized() bool {
	return locked(h, func(st *handleState) bool { return st.materialized })
}

// Open opens a session for reading or writing (FORMAT.md §7.3). A write open claims
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
	sd, err := s.locateStored(id)
	if err != nil {
		return nil, err
	}
	st.dir = sd.dir
	if sd.generation == "" {
		l, err := s.pendingLease(sd)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, notFound(id)
		}
		st.header, st.inherited = l.Pending.Header, l.Pending.InheritedEventCount
		return s.newHandle(st), nil
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
	return s.newHandle(st), nil
}

func (s *Store) openWrite(ctx context.Context, id string, opts OpenOptions) (*Handle, error) {
	// 1. In-process claim first, before any existence check.
	if w := s.writerFor(id); w != nil {
		if w.ref.HandleID == opts.HandleID {
			return s.newHandle(w), nil
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
	sd, err := s.locateStored(id)
	if err != nil {
		return nil, err
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
		if rerr != nil || l == nil || l.HandleID != opts.HandleID {
			return nil, alreadyOwned(id)
		}
		// A retried open whose first attempt took the lease: continue.
	} else {
		s.metrics.LeaseAcquired()
	}
	st, err := s.primeWriter(ctx, id, sd, opts.HandleID, opts.Cut.Force)
	if err != nil {
		if rerr := s.releaseLease(sd.dir, opts.HandleID); rerr != nil {
			return nil, &AggregateError{Message: fmt.Sprintf("session %q: write open failed and its lock release failed", id), Errors: []error{err, rerr}}
		}
		return nil, err
	}
	s.setWriter(id, st)
	return s.newHandle(st), nil
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
	s.releaseLog(st)
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

func (s *Store) leaseNames(dir, handle string) bool {
	l, err := s.readLease(dir)
	return err != nil || (l != nil && l.HandleID == handle)
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
	s.releaseFiles(st)
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
		s.releaseFiles(old)
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
		return s.newHandle(w)
	}
	return s.newHandle(&handleState{ref: ref, torn: -1})
}

// writer resolves a write handle's state under its session slot, loading it
// from the lease and the log when this process has not seen it.
func (h *Handle) writer(ctx context.Context, op string) (*handleState, error) {
	st := h.state()
	if st.closed.Load() {
		return nil, handleClosed(st.ref.SessionID, op)
	}
	s := h.s
	if w := s.writerFor(st.ref.SessionID); w != nil && w.ref.HandleID == st.ref.HandleID {
		h.st.Store(w)
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
	if l == nil || l.HandleID != st.ref.HandleID {
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
	h.st.Store(nst)
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

// withWriterLease runs fn under the lease's mutation lock, verifying that the
// lease still names the handle. The verified lease descriptor is kept: lease
// files are published whole and never rewritten, so while the path still
// names the same inode it still names this handle, and later mutations need
// only flock and one stat.
func (s *Store) withWriterLease(ctx context.Context, st *handleState, fn func() error) error {
	path := filepath.Join(st.dir, leaseFile)
	defer s.releaseExcess(st)
	if st.lease != nil {
		if err := s.flock(ctx, st.lease); err != nil {
			return err
		}
		pi, err := s.fs.Lstat(path)
		if err == nil && os.SameFile(pi, st.leaseFI) {
			s.fdUsed(st)
			defer s.unlockLease(st)
			return fn()
		}
		_ = st.lease.Flock(unix.LOCK_UN)
		s.releaseLeaseFile(st)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	// (Re)open: the lease descriptor was never opened, was given back under
	// the descriptor limit, or names a replaced lease. The lease must still
	// name the handle (OwnershipLost otherwise), and the handle id must not
	// have been revoked since (closed elsewhere by a Close that stopped
	// before removing the lease: HandleClosed, FORMAT.md §6.1).
	s.makeRoom(st)
	ll, err := s.lockLease(ctx, st.dir)
	if err != nil {
		return err
	}
	if ll == nil {
		return ownershipLost(st.ref.SessionID)
	}
	if ll.lease.HandleID != st.ref.HandleID {
		ll.release()
		return ownershipLost(st.ref.SessionID)
	}
	if r, err := s.isRevoked(st.ref.HandleID); err != nil || r {
		ll.release()
		if err != nil {
			return err
		}
		st.closed.Store(true)
		return handleClosed(st.ref.SessionID, "write")
	}
	fi, err := ll.f.Stat()
	if err != nil {
		ll.release()
		return err
	}
	st.lease, st.leaseFI = ll.f, fi
	s.fdOpened(st)
	defer s.unlockLease(st)
	return fn()
}

// unlockLease releases the mutation lock; if unlocking fails, closing the
// descriptor releases it.
func (s *Store) unlockLease(st *handleState) {
	if st.lease == nil {
		return
	}
	if err := st.lease.Flock(unix.LOCK_UN); err != nil {
		s.releaseLeaseFile(st)
	}
}
