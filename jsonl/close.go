package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sessionflow/sessionflow/wire"
)

// releaseLease removes the lease if it names handle.
func (s *Store) releaseLease(dir, handle string) error {
	ll, err := s.lockLease(context.Background(), dir)
	if err != nil || ll == nil {
		return err
	}
	defer ll.release()
	if ll.lease.HandleID != handle {
		return nil
	}
	return s.dropLease(dir, false)
}

// Close releases the handle (FORMAT.md §7.7). It is idempotent and not
// cancellable: the handle id is recorded as revoked, the lease is removed if
// it names the handle, and a session that never materialized is erased.
// Ownership is released even when Close reports an error.
func (h *Handle) Close(ctx context.Context) error {
	st := h.state()
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
	if err := wire.ValidateID(id); err != nil {
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
		s.releaseFiles(w)
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
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, wire.ErrLayout) {
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
		if ll.lease.HandleID == handle {
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
