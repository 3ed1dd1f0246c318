package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
)

// Summary is the mutable session summary kept in the summary.json sidecar
// (FORMAT.md §6.6). It is optional metadata: the log is the transaction.
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
	sd, err := s.locateStored(id)
	if err != nil {
		return Summary{}, false, err
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
	sd, err := s.locateStored(id)
	if err != nil {
		return err
	}
	sum, _, err := s.loadSidecar(sd.dir)
	if err != nil {
		return err
	}
	if u.Title != nil {
		sum.Title = *u.Title
	}
	if u.FirstPrompt != nil {
		sum.FirstPrompt = *u.FirstPrompt
	}
	sum.UpdatedAt = s.now().UnixMilli()
	return s.writeSidecar(sd.dir, sum)
}

// summaryRefreshInterval bounds how often appends refresh a session's
// summary: a refresh costs a file creation and a rename, several times the
// cost of the append's own fsync, and updatedAt needs no finer grain.
const summaryRefreshInterval = time.Second

// touchSummary refreshes updatedAt after an append, best-effort, at most once
// per summaryRefreshInterval per session.
func (s *Store) touchSummary(dir string) {
	now := s.now()
	s.mu.Lock()
	last, seen := s.touched[dir]
	due := !seen || now.Sub(last) >= summaryRefreshInterval || now.Before(last)
	if due {
		s.touched[dir] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	sum, _, err := s.loadSidecar(dir)
	if err != nil {
		s.log.Debug("session summary read failed", "dir", dir, "err", err)
		return // never replace a summary that could not be read
	}
	sum.UpdatedAt = s.now().UnixMilli()
	if err := s.writeSidecar(dir, sum); err != nil {
		s.log.Debug("session summary update failed", "dir", dir, "err", err)
	}
}

func (s *Store) readSidecar(dir string) (Summary, bool) {
	sum, ok, err := s.loadSidecar(dir)
	return sum, ok && err == nil
}

// loadSidecar reads the sidecar. A missing or invalid sidecar is ok=false
// without an error; an I/O failure is an error, so that callers never
// replace a summary they could not read.
func (s *Store) loadSidecar(dir string) (Summary, bool, error) {
	var sum Summary
	f, _, err := s.openFile(filepath.Join(dir, summaryFile), os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sum, false, nil
		}
		return sum, false, err
	}
	defer f.Close()
	body, err := io.ReadAll(f)
	if err != nil {
		return sum, false, err
	}
	if json.NewDecoder(bytes.NewReader(body)).Decode(&sum) != nil {
		return Summary{}, false, nil
	}
	return sum, true, nil
}

// writeSidecar writes through an exclusive temp file and a rename; the
// sidecar is recoverable metadata, so neither is fsynced.
func (s *Store) writeSidecar(dir string, sum Summary) error {
	body, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "summary."+randhex.String(6)+".tmp")
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
