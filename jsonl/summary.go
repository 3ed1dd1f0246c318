package jsonl

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Summary is the mutable session summary kept in the summary.json sidecar
// (SPEC 0.4). It is optional metadata: the log is the transaction.
type Summary struct {
	// UpdatedAt is the last update in Unix milliseconds.
	UpdatedAt int64 `json:"updatedAt"`
	// Title is a human title, if set.
	Title string `json:"title,omitempty"`
	// FirstPrompt is the first user prompt, if recorded.
	FirstPrompt string `json:"firstPrompt,omitempty"`
}

// SummaryUpdate changes the summary; nil fields are left as they are.
type SummaryUpdate struct {
	// Title replaces the title when non-nil.
	Title *string
	// FirstPrompt replaces the first prompt when non-nil.
	FirstPrompt *string
}

// ReadSummary returns the session's summary. ok is false when the sidecar is
// missing, unreadable or invalid (it is optional metadata); UpdatedAt then
// defaults to the header's createdAt. A missing session is ErrNotFound.
func (s *Store) ReadSummary(ctx context.Context, id string) (Summary, bool, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return Summary{}, false, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil {
		return Summary{}, false, err
	}
	if !found {
		return Summary{}, false, notFound(id)
	}
	sum, ok := s.readSidecar(sd.dir)
	if !ok {
		if snap, err := s.snapshot(sd); err == nil && snap != nil {
			sum.UpdatedAt = snap.Header.CreatedAt
		}
	}
	return sum, ok, nil
}

// UpdateSummary writes the sidecar. Its failure is returned and never
// becomes durable later: appends only refresh updatedAt on what is stored.
func (s *Store) UpdateSummary(ctx context.Context, id string, u SummaryUpdate) error {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil {
		return err
	}
	if !found {
		return notFound(id)
	}
	sum, _ := s.readSidecar(sd.dir)
	if u.Title != nil {
		sum.Title = *u.Title
	}
	if u.FirstPrompt != nil {
		sum.FirstPrompt = *u.FirstPrompt
	}
	sum.UpdatedAt = s.now().UnixMilli()
	return s.writeSidecar(sd.dir, sum)
}

// touchSummary refreshes updatedAt after an append, best-effort.
func (s *Store) touchSummary(dir string) {
	sum, _ := s.readSidecar(dir)
	sum.UpdatedAt = s.now().UnixMilli()
	if err := s.writeSidecar(dir, sum); err != nil {
		s.log.Debug("session summary update failed", "dir", dir, "err", err)
	}
}

func (s *Store) readSidecar(dir string) (Summary, bool) {
	var sum Summary
	f, err := s.fs.OpenFile(filepath.Join(dir, summaryFile), os.O_RDONLY, 0)
	if err != nil {
		return sum, false
	}
	defer f.Close()
	if json.NewDecoder(f).Decode(&sum) != nil {
		return Summary{}, false
	}
	return sum, true
}

// writeSidecar writes through an exclusive temp file and a rename; the
// sidecar is recoverable metadata, so neither is fsynced.
func (s *Store) writeSidecar(dir string, sum Summary) error {
	body, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "summary."+randomHex(6)+".tmp")
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, filepath.Join(dir, summaryFile))
	}
	if err != nil {
		if rerr := s.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return errors.Join(err, rerr)
		}
	}
	return err
}
