package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sessionflow/sessionflow/wire"
)

// Create registers a new session and returns its write handle (FORMAT.md §7.2).
// The session holds the write lease at once, recording the header in it, so
// any worker that presents the handle id can materialize it; nothing else is
// written until the first append or flush. Retrying Create with the same
// handle id returns the same handle.
func (s *Store) Create(ctx context.Context, h wire.Header, opts CreateOptions) (*Handle, error) {
	if h.Version == 0 {
		h.Version = wire.FormatVersion
	}
	if h.Version != wire.FormatVersion {
		return nil, invalidArgument(h.ID, fmt.Errorf("session header version must be %d", wire.FormatVersion))
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
		return s.newHandle(w), nil
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
			if l, err := s.readLease(sd.dir); err == nil && l != nil && l.HandleID == opts.HandleID && l.Pending != nil {
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
	lease.Pending = &wire.PendingSession{Header: h, InheritedEventCount: opts.InheritedEventCount}
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

func (s *Store) newLease(handle string, owner Owner) wire.Lease {
	return wire.Lease{HandleID: handle, Owner: owner, Host: s.host, PID: s.pid, AcquiredAt: s.now().UnixMilli()}
}

func (s *Store) registerPending(id, dir string, l *wire.Lease) *Handle {
	st := &handleState{
		ref:       HandleRef{SessionID: id, HandleID: l.HandleID, Access: AccessWrite},
		header:    l.Pending.Header,
		inherited: l.Pending.InheritedEventCount,
		dir:       dir,
		path:      filepath.Join(dir, s.generationFor(l.Pending.Header)),
		torn:      -1,
	}
	s.setWriter(id, st)
	return s.newHandle(st)
}

// releasePending removes a pending session's lease and its directory.
func (s *Store) releasePending(dir, handle string) {
	ll, err := s.lockLease(context.Background(), dir)
	if err != nil || ll == nil {
		return
	}
	defer ll.release()
	if ll.lease.HandleID == handle {
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
