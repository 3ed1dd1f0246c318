package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Compression selects the physical encoding of a root. A root belongs to one
// encoding (FORMAT.md §3.5).
type Compression string

// Encodings.
const (
	CompressionZstd Compression = "zstd"
	CompressionNone Compression = "none"
)

// ParseCompression accepts "zstd" and "none".
func ParseCompression(s string) (Compression, error) {
	switch Compression(s) {
	case CompressionZstd, CompressionNone:
		return Compression(s), nil
	}
	return "", fmt.Errorf("unknown compression %q (want \"none\" or \"zstd\")", s)
}

// DefaultRevocationRetention is how long a closed handle id stays revoked.
const DefaultRevocationRetention = 7 * 24 * time.Hour

// maxHandleIDBytes bounds a handle id.
const maxHandleIDBytes = 512

// Options configures a Store.
type Options struct {
	// Root is the store root; relative roots are resolved once, at NewStore.
	Root string
	// Compression is the root's encoding; the default is CompressionZstd.
	Compression Compression
	// FS is the filesystem; the default is OSFS.
	FS FS
	// Logger receives warnings (torn-tail repairs); the default is slog.Default().
	Logger *slog.Logger
	// RevocationRetention is how long closed handle ids stay revoked; the
	// default is DefaultRevocationRetention.
	RevocationRetention time.Duration
	// Now is the clock used for lease and summary times; the default is time.Now.
	Now func() time.Time
	// Metrics, when set, observes store operations.
	Metrics Metrics
	// Format is the log format new sessions are written in; the default is
	// FormatV3 (see FormatV0 for a root shared with the published harness).
	Format Format
	// MaxDescriptors bounds the descriptors write handles keep open between
	// mutations (two per handle: its lease and its log). Past it, the least
	// recently used handles not in an operation close theirs and reopen
	// them, through the full lease check, on their next mutation
	// (docs/DECISIONS.md D52). 0 means no limit.
	MaxDescriptors int
}

// Store is a JSONL session store over one root (FORMAT.md §7). It is safe for
// concurrent use; within one Store, operations on the same session are
// serialized, and across processes the lease file and its flock exclude
// writers.
type Store struct {
	root      string
	comp      Compression
	fs        FS
	log       *slog.Logger
	codec     *zstdCodec
	retention time.Duration
	now       func() time.Time
	host      string
	pid       int
	metrics   Metrics
	format    Format

	mu        sync.Mutex
	slots     map[string]chan struct{}
	writers   map[string]*handleState // session id -> open write handle state
	rootOK    bool
	lastPrune time.Time
	touched   map[string]time.Time // session dir -> last summary refresh
	fds       descriptorBudget
}

// NewStore opens a store. An absent root is fine (it is created by the first
// materialization); a root that exists but is not a directory fails here with
// the OS error (ENOTDIR), as does any other error than ENOENT.
func NewStore(opts Options) (*Store, error) {
	if opts.Root == "" {
		return nil, errors.New("jsonl: store root is required")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	s := &Store{
		root:      root,
		comp:      opts.Compression,
		fs:        opts.FS,
		log:       opts.Logger,
		retention: opts.RevocationRetention,
		now:       opts.Now,
		pid:       os.Getpid(),
		metrics:   opts.Metrics,
		slots:     map[string]chan struct{}{},
		writers:   map[string]*handleState{},
		touched:   map[string]time.Time{},
	}
	if opts.MaxDescriptors < 0 {
		return nil, fmt.Errorf("jsonl: the descriptor limit %d is negative", opts.MaxDescriptors)
	}
	s.fds.limit = opts.MaxDescriptors
	if s.comp == "" {
		s.comp = CompressionZstd
	}
	if _, err := ParseCompression(string(s.comp)); err != nil {
		return nil, err
	}
	if s.format, err = ParseFormat(string(opts.Format)); err != nil {
		return nil, err
	}
	if s.fs == nil {
		s.fs = OSFS{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.retention <= 0 {
		s.retention = DefaultRevocationRetention
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.metrics == nil {
		s.metrics = nopMetrics{}
	}
	s.host, _ = os.Hostname()
	if s.codec, err = newZstdCodec(); err != nil {
		return nil, err
	}
	fi, err := s.fs.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, &fs.PathError{Op: "open", Path: root, Err: syscall.ENOTDIR}
	}
	return s, nil
}

// Root is the absolute store root.
func (s *Store) Root() string { return s.root }

// Compression is the root's encoding.
func (s *Store) Compression() Compression { return s.comp }

// lockSession serializes operations on one session inside this Store.
func (s *Store) lockSession(ctx context.Context, id string) (func(), error) {
	s.mu.Lock()
	ch, ok := s.slots[id]
	if !ok {
		ch = make(chan struct{}, 1)
		s.slots[id] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// begin checks the context and the id, and takes the session's slot.
func (s *Store) begin(ctx context.Context, id string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if err := wire.ValidateID(id); err != nil {
		return nil, invalidArgument(id, err)
	}
	if err := s.checkRoot(); err != nil {
		return nil, err
	}
	return s.lockSession(ctx, id)
}

// readFile reads a whole file.
func (s *Store) readFile(path string) ([]byte, error) {
	f, buf, err := s.openSized(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRest(f, buf)
}

// readSlack is the room a read buffer has beyond the file's stat size, so
// that reading to EOF rarely grows it.
const readSlack = 512

// openSized opens path for reading and returns it with an empty buffer of
// the file's stat size plus readSlack.
func (s *Store) openSized(path string) (File, []byte, error) {
	f, fi, err := s.openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, nil, err
	}
	return f, make([]byte, 0, fi.Size()+readSlack), nil
}

// scanFile reads and validates a log file (FORMAT.md §4) for session id, checking
// identity and vocabulary (FORMAT.md §4.5). It returns errors classified as
// corruption or format refusals with the raw-log path.
func (s *Store) scanFile(id, path string) (*scanResult, error) {
	return s.scanFileForce(id, path, false)
}

// scanFileForce is scanFile; with force, a raw log's damage followed by
// valid records is accepted as a suffix to cut (CutOptions.Force).
func (s *Store) scanFileForce(id, path string, force bool) (*scanResult, error) {
	r, err := s.readScan(id, path, force)
	if err != nil {
		return nil, err
	}
	if err := s.checkIdentity(id, path, r.header); err != nil {
		return nil, err
	}
	if err := checkGenerationVersion(id, path, r.header); err != nil {
		return nil, err
	}
	v0 := r.header.Version == wire.FormatVersionV0
	if v0 {
		if err := harnessUpgrade(id, r.events, r.recovered); err != nil {
			return nil, &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Err: err,
				Message: fmt.Sprintf("stored session %q failed validation: %v (raw log: %s)", id, err, path)}
		}
	}
	for _, evs := range [][]session.Event{r.events, r.recovered} {
		for _, e := range evs {
			if !e.InterpretableIn(r.header) {
				return nil, &wire.StoreError{Code: CodeFormatUnsupported, SessionID: id, Path: path, Message: fmt.Sprintf(
					"session %q contains event type %q (seq %d) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness (raw log: %s)",
					id, e.Type, e.Seq, path)}
			}
		}
	}
	if v0 {
		if err := harnessFold(r.events, r.recovered); err != nil {
			return nil, &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Err: err,
				Message: fmt.Sprintf("stored session %q failed validation: %v (raw log: %s)", id, err, path)}
		}
	}
	if all := append(r.events[:len(r.events):len(r.events)], r.recovered...); len(all) > 0 {
		if err := checkFormatRules(r.header, all); err != nil {
			return nil, &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Err: err,
				Message: fmt.Sprintf("stored session %q failed validation: %v", id, err)}
		}
		if err := validateInherited(r.header, all); err != nil {
			return nil, &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Err: err,
				Message: fmt.Sprintf("stored session %q failed validation: %v", id, err)}
		}
	}
	return r, nil
}

// readScan reads and validates a log file (FORMAT.md §2.3, §4.3, §4.4). Read
// errors are returned as they are, decoding failures classified.
func (s *Store) readScan(id, path string, force bool) (*scanResult, error) {
	if s.comp == CompressionZstd {
		data, err := s.readFile(path)
		if err != nil {
			return nil, err
		}
		r, err := scanZstd(s.codec, data)
		if err != nil {
			return nil, s.classify(id, path, err)
		}
		return r, nil
	}
	data, chunks, err := s.readRawDecoding(path)
	if err != nil {
		return nil, err
	}
	r, err := scanRawDecoded(data, chunks, force)
	if err != nil {
		return nil, s.classify(id, path, err)
	}
	return r, nil
}

// classify turns a decode failure into a format refusal or a corruption
// error naming the raw log (FORMAT.md §4.5 item 1).
func (s *Store) classify(id, path string, err error) error {
	if ferr := formatRefusal(id, path, err); ferr != nil {
		return ferr
	}
	return &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Err: err,
		Message: fmt.Sprintf("session %q: stored log is corrupt: %v (raw log: %s)", id, err, path)}
}

// checkIdentity verifies that a header belongs to the file it was read from.
func (s *Store) checkIdentity(id, path string, h wire.Header) error {
	if h.ID != id {
		return &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Message: fmt.Sprintf(
			"corrupt session log %q: requested id %q does not match header id %q", path, id, h.ID)}
	}
	dir, err := s.dirFor(h)
	if err != nil || filepath.Dir(path) != dir {
		return &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Message: fmt.Sprintf(
			"corrupt session log %q: header id %q and cwd identify %q", path, h.ID, filepath.Join(dir, filepath.Base(path)))}
	}
	return nil
}

// validHandleID checks a caller-supplied handle id.
func validHandleID(id, handle string) error {
	if handle == "" || len(handle) > maxHandleIDBytes || !utf8.ValidString(handle) {
		return invalidArgument(id, fmt.Errorf("handle id must be a non-empty valid UTF-8 string of at most %d bytes", maxHandleIDBytes))
	}
	return nil
}
