package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/wire"
)

// quarantineInfix joins a log's name and the offset of the bytes a cut
// removed from it: session.v3.jsonl.broken-<offset>.
const quarantineInfix = ".broken-"

// maxQuarantineNames bounds the numbered siblings tried when a quarantine
// name is taken by other bytes.
const maxQuarantineNames = 1000

// CutOptions configures how a write open cuts a damaged log: the torn-tail
// cut, the part of a crash repair the store makes itself.
type CutOptions struct {
	// Force accepts a raw log whose damage is followed by complete valid
	// records (reads refuse it as corrupt: a crash tears only the final
	// write, so such damage is not a torn tail). The handle then serves the
	// valid records before the first damage, and its first mutation (or
	// Handle.CutTail) cuts the log there, after copying everything it
	// removes, the valid records after the damage included, to a quarantine
	// file beside the log. It has no effect on a log a read accepts, nor on
	// a Zstandard log, whose complete frames must all be valid.
	Force bool
}

// TailCut describes a cut of a log's damaged or torn suffix.
type TailCut struct {
	// Offset is the log size after the cut: where the removed bytes began.
	Offset int64 `json:"offset"`
	// Bytes is how many bytes were removed.
	Bytes int64 `json:"bytes"`
	// Quarantine is the file beside the log holding exactly the removed
	// bytes: <log name>.broken-<Offset>.
	Quarantine string `json:"quarantine"`
	// Forced is set when the removed bytes held complete valid records after
	// damage (a cut only CutOptions.Force allows).
	Forced bool `json:"forced,omitempty"`
}

// CutTail performs now the cut a write handle otherwise makes before its
// next append: the torn (or, with CutOptions.Force, damaged) suffix of
// the log is copied to a quarantine file and the log truncated to its last
// valid record. It returns nil when the log has nothing to cut.
func (h *Handle) CutTail(ctx context.Context) (*TailCut, error) {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return nil, handleClosed(id, "cut tail")
	}
	if h.ref.Access != AccessWrite {
		return nil, readOnly(id, "cut tail")
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := h.writer(ctx, "cut tail")
	if err != nil {
		return nil, err
	}
	if !st.materialized {
		return nil, nil
	}
	var cut *TailCut
	err = s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		if st.torn < 0 && len(st.recovered) == 0 {
			return nil
		}
		var err error
		cut, err = s.repair(st)
		return err
	})
	return cut, err
}

// quarantine copies the bytes of the log at path from offset to its end
// into a new file beside it, <name>.broken-<offset>, durably: the copy is
// written to a temp file, fsynced, linked into place without replacing
// anything, and the directory fsynced. A file of that name already holding
// exactly these bytes (a retried cut) is kept as it is; one holding other
// bytes gets a numbered sibling (<name>.broken-<offset>.2, ...). It returns
// the quarantine path.
func (s *Store) quarantine(path string, offset int64) (string, error) {
	src, fi, err := s.openFile(path, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer src.Close()
	size := fi.Size() - offset
	if size < 0 {
		return "", fmt.Errorf("quarantine %q from byte %d: the file has only %d bytes", path, offset, fi.Size())
	}
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "session."+randhex.String(6)+".tmp")
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = s.fs.Remove(tmp) }()
	_, err = io.Copy(f, io.NewSectionReader(src, offset, size))
	if err == nil {
		err = s.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	base := filepath.Base(path) + quarantineInfix + strconv.FormatInt(offset, 10)
	for n := 1; n <= maxQuarantineNames; n++ {
		name := base
		if n > 1 {
			name += "." + strconv.Itoa(n)
		}
		dst := filepath.Join(dir, name)
		err := s.fs.Link(tmp, dst)
		if err == nil {
			if err := s.syncDir(dir); err != nil {
				// The entry may not be durable: withdraw it so a retry
				// starts afresh and the cut does not happen.
				_ = s.fs.Remove(dst)
				return "", err
			}
			return dst, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		same, err := s.sameContent(dst, src, offset, size)
		if err != nil {
			return "", err
		}
		if same {
			// A previous attempt published it; make sure its entry is durable.
			return dst, s.syncDir(dir)
		}
	}
	return "", &fs.PathError{Op: "quarantine", Path: filepath.Join(dir, base), Err: syscall.EEXIST}
}

// sameContent reports whether the file at path holds exactly the size bytes
// of src from offset. A symbolic link or a file that is not regular is never
// followed or read: it is not the same.
func (s *Store) sameContent(path string, src File, offset, size int64) (bool, error) {
	f, fi, err := s.openFile(path, os.O_RDONLY)
	if errors.Is(err, wire.ErrLayout) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi.Size() != size {
		return false, nil
	}
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for pos := int64(0); pos < size; {
		n := int(min(int64(len(a)), size-pos))
		if _, err := io.ReadFull(f, a[:n]); err != nil {
			return false, err
		}
		if m, err := src.ReadAt(b[:n], offset+pos); m < n {
			return false, err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
		pos += int64(n)
	}
	return true, nil
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
		s.releaseLog(st)
		s.metrics.TornTailCut()
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
