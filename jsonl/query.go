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
	"sort"
	"syscall"

	"github.com/sessionflow/sessionflow/wire"
)

// headerChunk is the read size of header-only reads (FORMAT.md §4.4).
const headerChunk = 8 << 10

// maxHeaderBytes bounds a header-only read.
const maxHeaderBytes = 16 << 20

// Snapshot describes a stored or pending session without reading its events.
type Snapshot struct {
	// Header is the session header.
	Header wire.Header `json:"header"`
	// Revision is an opaque change token: dev:ino:size:mtimeNs:ctimeNs of the
	// log file, or pending:<handle> for a created session with no log yet.
	Revision string `json:"revision"`
	// SizeBytes is the physical log size; 0 for a pending session.
	SizeBytes int64 `json:"sizeBytes"`
	// Pending is true for a created session that has not materialized.
	Pending bool `json:"pending,omitempty"`
	// Path is the log file (empty when pending); on a row with a Problem,
	// the entry the problem is about.
	Path string `json:"path,omitempty"`
	// Problem is set on a List row the store cannot serve (see List); the
	// other fields but Header.ID and Path are then zero.
	Problem *Problem `json:"problem,omitempty"`
}

// Stat describes a session without reading its events or taking ownership.
// It returns (nil, nil) when the session is absent or its header is not a
// readable session header; a foreign format version is an error.
func (s *Store) Stat(ctx context.Context, id string) (*Snapshot, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil || !found {
		return nil, err
	}
	snap, err := s.snapshot(sd)
	if err != nil || snap == nil {
		return nil, err
	}
	if snap.Header.ID != id {
		return nil, nil
	}
	return snap, nil
}

// snapshot reads one session directory's header-only view.
func (s *Store) snapshot(sd sessionDir) (*Snapshot, error) {
	if sd.generation == "" {
		l, err := s.pendingLease(sd)
		if l == nil {
			return nil, err
		}
		return &Snapshot{Header: l.Pending.Header, Revision: "pending:" + l.HandleID, Pending: true}, nil
	}
	h, ok, err := s.readHeader(sd.generation)
	if err != nil || !ok {
		return nil, err
	}
	fi, err := s.fs.Lstat(sd.generation)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return &Snapshot{Header: h, Revision: revision(fi), SizeBytes: fi.Size(), Path: sd.generation}, nil
}

// revision renders a file identity token.
func revision(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d:%d:%d", st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
	}
	return fmt.Sprintf("0:0:%d:%d:0", fi.Size(), fi.ModTime().UnixNano())
}

// readHeader reads only the header of a log file: the first line (raw) or
// the first frame (zstd), in 8 KiB chunks. ok=false means "no header"
// (absent file, no complete first record, malformed header); a foreign
// version and retired fields are errors.
func (s *Store) readHeader(path string) (wire.Header, bool, error) {
	var h wire.Header
	f, _, err := s.openFile(path, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return h, false, nil
		}
		return h, false, err
	}
	defer f.Close()
	var buf []byte
	chunk := make([]byte, headerChunk)
	for len(buf) < maxHeaderBytes {
		n, rerr := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		line, complete, perr := s.headerRecord(buf)
		if perr != nil {
			return h, false, nil
		}
		if complete {
			h, err := parseHeaderLine(line)
			if err != nil {
				if ferr := formatRefusal("", path, err); ferr != nil {
					return h, false, ferr
				}
				if errors.Is(err, errRetiredFields) {
					return h, false, &wire.StoreError{Code: CodeCorrupt, Path: path, Err: err, Message: err.Error()}
				}
				return h, false, nil
			}
			return h, true, nil
		}
		if rerr == io.EOF {
			return h, false, nil
		}
		if rerr != nil {
			return h, false, rerr
		}
	}
	return h, false, nil
}

// headerRecord extracts the header line from the start of a log once it is
// complete.
func (s *Store) headerRecord(buf []byte) ([]byte, bool, error) {
	if s.comp != CompressionZstd {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return buf[:i], true, nil
		}
		return nil, false, nil
	}
	frames, _, err := scanZstdFrames(buf)
	if err != nil {
		return nil, false, err
	}
	if len(frames) == 0 {
		return nil, false, nil
	}
	plain, err := s.codec.decodeFrame(buf[frames[0].start:frames[0].end])
	if err != nil {
		return nil, false, errZstdHeaderInvalid
	}
	if len(plain) == 0 || bytes.IndexByte(plain, '\n') != len(plain)-1 {
		return nil, false, errZstdHeaderFrame
	}
	return plain[:len(plain)-1], true, nil
}

// List describes every session under the root, pending ones included,
// sorted by id (then path); an absent root lists nothing. An entry the
// store cannot serve (a log of a format this build does not read, a
// malformed header, a header naming another id, two unrelated generations,
// a damaged session directory, an id found in two project directories, a
// project directory that is a symbolic link) is a row with a Problem, whose Header
// holds only the id its directory name decodes to, and listing goes on: one
// damaged session never hides the others. Only a failure to read the root
// itself, or a root that mixes encodings, fails the whole list.
func (s *Store) List(ctx context.Context) ([]Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	// List scans the whole root (FORMAT.md §3.5) before the marker check,
	// so that a root of the other encoding is named by its first foreign
	// artifact, as the published harness names it.
	if err := s.scanRoot(); err != nil {
		return nil, err
	}
	if err := s.checkRoot(); err != nil {
		return nil, err
	}
	projects, odd, err := s.rootEntries()
	if err != nil {
		return nil, err
	}
	var out []Snapshot
	for _, e := range odd {
		out = append(out, problemRow("", filepath.Join(s.root, e.Name()), s.oddProjectError(e)))
	}
	byID := map[string][]int{} // id -> indexes of its healthy rows
	for _, p := range projects {
		entries, err := s.fs.ReadDir(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			out = append(out, problemRow("", p, err))
			continue
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx)
			}
			path := filepath.Join(p, e.Name())
			id, named := decodeSegment(e.Name())
			if !e.Type().IsDir() {
				if named && e.Type()&fs.ModeSymlink != 0 {
					out = append(out, problemRow(id, path, withSession(symlinkError("session directory", path), id)))
				}
				continue
			}
			snap, err := s.listEntry(path)
			switch {
			case err != nil:
				out = append(out, problemRow(id, path, withSession(err, id)))
				continue
			case snap == nil:
				continue
			}
			if seg, err := EncodeSegment(snap.Header.ID); err != nil || seg != e.Name() {
				out = append(out, problemRow(id, path, foreignHeader(path, snap)))
				continue
			}
			byID[snap.Header.ID] = append(byID[snap.Header.ID], len(out))
			out = append(out, *snap)
		}
	}
	for id, rows := range byID {
		if len(rows) > 1 {
			for _, i := range rows {
				out[i] = problemRow(id, out[i].Path, duplicateID(id))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Header.ID != out[j].Header.ID {
			return out[i].Header.ID < out[j].Header.ID
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// listEntry reads one session directory's List row: nil when it holds no
// session (empty, a foreign-format or malformed header), an error when it
// cannot be served.
func (s *Store) listEntry(dir string) (*Snapshot, error) {
	sd, err := s.inspectSessionDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	snap, err := s.snapshot(sd)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if snap == nil && sd.generation != "" {
		if err := s.headerProblem(sd.generation); !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return snap, nil
}

// Has reports whether the session has a log on disk. A created session that
// never materialized does not count.
func (s *Store) Has(ctx context.Context, id string) (bool, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return false, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	return found && sd.generation != "", err
}

// LeaseOf returns the session's current lease, or nil when none is held.
func (s *Store) LeaseOf(ctx context.Context, id string) (*wire.Lease, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil || !found {
		return nil, err
	}
	return s.readLease(sd.dir)
}

// ForceUnlock forfeits a session's lease without asking its owner (the
// operator's escape hatch, FORMAT.md §6.1 and §7.8): the lease's handle id is revoked and
// the lease removed; a never-materialized session is erased. It returns the
// removed lease, or nil when none was held. A lease whose content cannot be
// decoded (empty, damaged), or that is not a regular file (a symbolic link,
// which is removed, not followed, or a FIFO), is removed too and returned
// with Unreadable set.
// Callers that can reach Temporal first check that the owning workflow is
// not running.
func (s *Store) ForceUnlock(ctx context.Context, id string) (*wire.Lease, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if e := (*wire.StoreError)(nil); errors.As(err, &e) && e.Code == CodeLayout && filepath.Base(e.Path) == leaseFile {
		return s.removeDamagedLease(id, e)
	}
	if err != nil || !found || !sd.leased {
		return nil, err
	}
	ll, err := s.lockAnyLease(ctx, sd.dir)
	if err != nil || ll == nil {
		return nil, err
	}
	defer ll.release()
	lease := ll.lease
	if ll.bad != nil {
		// An unreadable lease names no handle id to revoke; whoever holds
		// it finds no lease at its next mutation and stops.
		lease = &wire.Lease{Unreadable: ll.bad.Error()}
	} else if err := s.revoke(id, lease.HandleID); err != nil {
		return nil, err
	}
	if w := s.writerFor(id); w != nil {
		s.dropWriter(w)
	}
	return lease, s.dropLease(sd.dir, sd.generation == "")
}

// removeDamagedLease removes a session.lock that is not a regular file (a
// symbolic link, a FIFO): the entry itself is unlinked, never what a link
// points to. The caller holds the session's slot.
func (s *Store) removeDamagedLease(id string, damage *wire.StoreError) (*wire.Lease, error) {
	dir := filepath.Dir(damage.Path)
	if err := s.checkSessionDir(id, dir); err != nil {
		return nil, err
	}
	if w := s.writerFor(id); w != nil {
		s.dropWriter(w)
	}
	if err := s.dropLease(dir, true); err != nil {
		return nil, err
	}
	return &wire.Lease{Unreadable: damage.Error()}, nil
}
