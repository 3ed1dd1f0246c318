package jsonl

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/wire"
)

// errLeaseHeld reports that the lease file exists (held by someone).
var errLeaseHeld = errors.New("lease held")

// lockPollInterval is how often a contended mutation lock is retried.
const lockPollInterval = 2 * time.Millisecond

// acquireLease publishes a lease file atomically with its content: write a
// temp file, fsync, link it to session.lock (never replacing), fsync the
// directory. It returns errLeaseHeld when a lease exists.
func (s *Store) acquireLease(dir string, l wire.Lease) error {
	body, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := s.publish(dir, leaseFile, body); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errLeaseHeld
		}
		return err
	}
	return nil
}

// writeSyncClose writes body to a new file, fsyncs and closes it; the first
// error is returned, and the file is closed in every case.
func writeSyncClose(f File, body []byte) error {
	_, err := f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// publish writes body to dir/name through an exclusive temp file and a
// no-overwrite link, then fsyncs the directory.
func (s *Store) publish(dir, name string, body []byte) error {
	tmp := filepath.Join(dir, "session."+randhex.String(6)+".tmp")
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = writeSyncClose(f, body)
	if err == nil {
		err = s.fs.Link(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	if err := s.syncDir(dir); err != nil {
		// The new entry may not be durable: withdraw it, so that the failed
		// call leaves the directory as it was and a retry starts afresh.
		_ = s.fs.Remove(filepath.Join(dir, name))
		_ = s.fs.Remove(tmp)
		return err
	}
	_ = s.fs.Remove(tmp) // best-effort: the file is already published
	return nil
}

// readLease returns the lease of a session directory, or nil when none.
func (s *Store) readLease(dir string) (*wire.Lease, error) {
	body, found, err := s.readSmallFile(filepath.Join(dir, leaseFile), leaseLimit)
	if err != nil || !found {
		return nil, err
	}
	return parseLease(body)
}

// leaseLimit bounds the bytes of a lease that are read.
const leaseLimit = 1 << 20

func decodeLease(r io.Reader) (*wire.Lease, error) {
	body, err := io.ReadAll(io.LimitReader(r, leaseLimit))
	if err != nil {
		return nil, err
	}
	return parseLease(body)
}

// parseLease decodes the bytes of a lease file.
func parseLease(body []byte) (*wire.Lease, error) {
	var l wire.Lease
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, &wire.StoreError{Code: CodeCorrupt, Message: "corrupt session lease: " + err.Error(), Err: err}
	}
	return &l, nil
}

// pendingLease reads the lease of a located session directory that holds
// no log. It returns nil when no creation is pending there: such a
// directory holds no session.
func (s *Store) pendingLease(sd sessionDir) (*wire.Lease, error) {
	l, err := s.readLease(sd.dir)
	if err != nil || l == nil || l.Pending == nil {
		return nil, err
	}
	return l, nil
}

// lockedLease is a lease file held under an exclusive flock.
type lockedLease struct {
	f     File
	lease *wire.Lease
	// bad is why the lease could not be decoded (lockAnyLease only); lease
	// is then nil.
	bad error
}

func (l *lockedLease) release() {
	_ = l.f.Flock(unix.LOCK_UN)
	_ = l.f.Close()
}

// lockLease takes the short exclusive flock on dir's lease file, re-checks
// that the locked file is still the published one and reads it. It returns
// (nil, nil) when no lease exists.
func (s *Store) lockLease(ctx context.Context, dir string) (*lockedLease, error) {
	ll, err := s.lockAnyLease(ctx, dir)
	if err != nil || ll == nil {
		return nil, err
	}
	if ll.bad != nil {
		ll.release()
		return nil, ll.bad
	}
	return ll, nil
}

// lockAnyLease is lockLease that also locks a lease whose content cannot be
// decoded (empty, truncated, not JSON), reporting why in bad, so that a
// forced unlock can remove it.
func (s *Store) lockAnyLease(ctx context.Context, dir string) (*lockedLease, error) {
	path := filepath.Join(dir, leaseFile)
	for {
		f, _, err := s.openFile(path, os.O_RDWR)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, err
		}
		if err := s.flock(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		// The lease may have been unlinked (closed, forfeited) or replaced
		// between open and flock: compare inodes.
		same, err := s.sameFile(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if !same {
			_ = f.Flock(unix.LOCK_UN)
			f.Close()
			continue
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		l, err := decodeLease(f)
		if err != nil {
			var e *wire.StoreError
			if !errors.As(err, &e) {
				_ = f.Flock(unix.LOCK_UN)
				f.Close()
				return nil, err // an I/O error, not bad content
			}
			return &lockedLease{f: f, bad: err}, nil
		}
		return &lockedLease{f: f, lease: l}, nil
	}
}

func (s *Store) flock(ctx context.Context, f File) error {
	for {
		err := f.Flock(unix.LOCK_EX | unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(lockPollInterval):
		}
	}
}

func (s *Store) sameFile(f File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := s.fs.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return os.SameFile(fi, pi), nil
}
