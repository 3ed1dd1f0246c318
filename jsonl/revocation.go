package jsonl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// revocationPath is the revocation record of a handle id. Records live under
// the root, not in the session directory, so they outlive the erasure of a
// never-materialized session (docs/DECISIONS.md).
func (s *Store) revocationPath(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(s.root, revocationsDir, hex.EncodeToString(sum[:16]))
}

// isRevoked reports whether handle was closed.
func (s *Store) isRevoked(handle string) (bool, error) {
	if _, err := s.rootDir(revocationsDir); err != nil {
		return false, err
	}
	_, err := s.fs.Lstat(s.revocationPath(handle))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// revocationRecord is the content of a revocation file. The handle id is
// written under "handleId" and, as in the lease, under the earlier key
// "handle" too.
type revocationRecord struct {
	HandleID  string `json:"handleId"`
	SessionID string `json:"sessionId"`
	RevokedAt int64  `json:"revokedAt"`
	Handle    string `json:"handle"`
}

// revoke durably records handle as closed. It is idempotent.
func (s *Store) revoke(id, handle string) error {
	dir, err := s.rootDir(revocationsDir)
	if err != nil {
		return err
	}
	if err := s.mkdirAll(dir); err != nil {
		return err
	}
	path := s.revocationPath(handle)
	body, _ := json.Marshal(revocationRecord{HandleID: handle, SessionID: id, RevokedAt: s.now().UnixMilli(), Handle: handle})
	f, err := s.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	err = writeSyncClose(f, body)
	if err != nil {
		_ = s.fs.Remove(path)
		return err
	}
	if err := s.syncDir(dir); err != nil {
		return err
	}
	s.pruneRevocations(dir)
	return nil
}

// pruneRevocations removes records older than the retention period, at most
// once per hour per store.
func (s *Store) pruneRevocations(dir string) {
	s.mu.Lock()
	due := s.now().Sub(s.lastPrune) >= time.Hour
	if due {
		s.lastPrune = s.now()
	}
	s.mu.Unlock()
	if !due {
		return
	}
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := s.now().Add(-s.retention)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			_ = s.fs.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// checkRevoked refuses a handle id that was closed (CodeHandleRevoked).
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
