package jsonl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// faultEnv is one run of a store operation under fault injection: a fresh
// root, a store whose filesystem can fail any operation, and the handle the
// operation uses.
type faultEnv struct {
	t      *testing.T
	comp   jsonl.Compression
	root   string
	path   string
	ffs    *faultfs.FS
	store  *jsonl.Store
	h      *jsonl.Handle
	handle string
	// before is what a reader sees before the operation, final what it sees
	// after the operation succeeded.
	before, final []session.Event
	// committed is the length of the log prefix that no repair may touch,
	// committedEvents the number of events it holds.
	committed, committedEvents int64
	// closed is set once the operation's handle has been closed.
	closed bool
}

func newFaultEnv(t *testing.T, comp jsonl.Compression, dir string) *faultEnv {
	t.Helper()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	root := filepath.Join(dir, "root")
	e := &faultEnv{t: t, comp: comp, root: root, path: durLogPath(t, root, comp), handle: "handle-under-test"}
	e.ffs = faultfs.New(durNoSyncFS{})
	e.store = durStore(t, root, comp, e.ffs)
	return e
}

func (e *faultEnv) ctx() context.Context { return context.Background() }

// readLog returns the log bytes, or nil when the log does not exist.
func (e *faultEnv) readLog() []byte {
	data, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(e.t, err)
	return data
}

func (e *faultEnv) size() int64 {
	fi, err := os.Stat(e.path)
	require.NoError(e.t, err)
	return fi.Size()
}

// faultTitle is the summary title set before operations on a stored log;
// best-effort summary refreshes must keep it.
const faultTitle = "a title that must survive"

// faultOp is a store operation exercised under fault injection.
type faultOp struct {
	name string
	// setup builds the state before the operation with a healthy filesystem.
	setup func(e *faultEnv)
	// run performs the operation.
	run func(e *faultEnv) error
	// retry repeats a failed operation: with the same handle while it is
	// usable, else through a close and a reopen.
	retry func(e *faultEnv) error
	// repair marks an operation allowed to leave the torn suffix cut (and
	// zstd-recovered records re-written) even when it fails.
	repair bool
	// summary: the state carries a summary title.
	summary bool
}

func faultOps() []faultOp {
	batch0 := func(t *testing.T) []session.Event { return durSeqEvents(t, 0, 4) }
	stored := func(e *faultEnv, handle string) {
		h, err := e.store.Create(e.ctx(), durHeader(), jsonl.CreateOptions{HandleID: handle})
		require.NoError(e.t, err)
		require.NoError(e.t, h.Append(e.ctx(), batch0(e.t)))
		require.NoError(e.t, e.store.UpdateSummary(e.ctx(), durID, jsonl.SummaryUpdate{Title: durString(faultTitle)}))
		e.h, e.before, e.committed, e.committedEvents = h, batch0(e.t), e.size(), 4
	}
	createAndAppend := func(e *faultEnv) error {
		if e.h == nil {
			h, err := e.store.Create(e.ctx(), durHeader(), jsonl.CreateOptions{HandleID: e.handle})
			if err != nil {
				return err
			}
			e.h = h
		}
		return e.h.Append(e.ctx(), batch0(e.t))
	}
	appendNext := func(e *faultEnv) error { return e.h.Append(e.ctx(), e.final[len(e.before):]) }
	return []faultOp{
		{
			name:  "materialize",
			setup: func(e *faultEnv) { e.final = batch0(e.t) },
			run:   createAndAppend,
			retry: createAndAppend,
		},
		{
			name: "append",
			setup: func(e *faultEnv) {
				stored(e, e.handle)
				e.final = durSeqEvents(e.t, 0, 8)
			},
			run:     appendNext,
			retry:   appendNext,
			summary: true,
		},
		{
			name: "repair",
			setup: func(e *faultEnv) {
				stored(e, "setup-creator")
				require.NoError(e.t, e.h.Close(e.ctx()))
				if e.comp == jsonl.CompressionZstd {
					// A frame of two records that lost its last checksum
					// bytes: both records are recovered and re-written.
					w, err := e.store.Open(e.ctx(), durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "setup-writer"})
					require.NoError(e.t, err)
					require.NoError(e.t, w.Append(e.ctx(), durSeqEvents(e.t, 4, 2)))
					require.NoError(e.t, w.Close(e.ctx()))
					require.NoError(e.t, os.Truncate(e.path, e.size()-2))
					e.before = durSeqEvents(e.t, 0, 6)
				} else {
					f, err := os.OpenFile(e.path, os.O_WRONLY|os.O_APPEND, 0)
					require.NoError(e.t, err)
					_, err = f.WriteString(`{"type":"system/message","seq":4,"ti`)
					require.NoError(e.t, err)
					require.NoError(e.t, f.Close())
				}
				h, err := e.store.Open(e.ctx(), durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: e.handle})
				require.NoError(e.t, err)
				e.h = h
				got, err := h.Read(e.ctx(), 0, -1)
				require.NoError(e.t, err)
				durRequireEvents(e.t, e.before, got)
				e.final = durSeqEvents(e.t, 0, 8)
			},
			run:     appendNext,
			retry:   appendNext,
			repair:  true,
			summary: true,
		},
		{
			name: "flush",
			setup: func(e *faultEnv) {
				h, err := e.store.Create(e.ctx(), durHeader(), jsonl.CreateOptions{HandleID: e.handle})
				require.NoError(e.t, err)
				e.h = h
			},
			run:   func(e *faultEnv) error { return e.h.Flush(e.ctx()) },
			retry: func(e *faultEnv) error { return e.h.Flush(e.ctx()) },
		},
		{
			name: "close",
			setup: func(e *faultEnv) {
				stored(e, e.handle)
				e.final = e.before
			},
			run: func(e *faultEnv) error {
				e.closed = true
				return e.h.Close(e.ctx())
			},
			retry: func(e *faultEnv) error {
				// A closed handle cannot be used again: the caller (the
				// workflow's close activity) retries by reference.
				return e.store.CloseHandle(e.ctx(), e.h.Ref())
			},
			summary: true,
		},
	}
}

func durString(v string) *string { return &v }

// TestFaultInjectionEveryOperation fails each filesystem operation of each
// store operation in turn with EIO and checks that the store either reports
// the error and leaves the log as it was, or (for best-effort steps)
// succeeds with the correct result; and that a retry, the close, and a
// later reopen all work.
func TestFaultInjectionEveryOperation(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		for _, op := range faultOps() {
			t.Run(string(comp)+"/"+op.name, func(t *testing.T) {
				dir := filepath.Join(durScratchDir(t), "env")
				// The clean run gives the operation count and the result.
				e := newFaultEnv(t, comp, dir)
				op.setup(e)
				e.ffs.Reset()
				require.NoError(t, op.run(e))
				n := e.ffs.Count()
				clean := e.readLog()
				faultFinish(e, op, nil, "clean run")
				require.Greater(t, n, 0)

				for i := 0; i < n; i++ {
					e := newFaultEnv(t, comp, dir)
					op.setup(e)
					prev := e.readLog()
					e.ffs.Reset()
					e.ffs.InjectAt(i, syscall.EIO)
					err := op.run(e)
					recs := e.ffs.Records()
					trace := e.ffs.String()
					e.ffs.Reset()
					require.Greater(t, len(recs), i, "identical runs must perform the same operations\n%s", trace)
					inj := recs[i]
					require.NotNil(t, inj.Injected, "operation %d\n%s", i, trace)
					where := fmt.Sprintf("EIO at %d (%s %s)\nthis run:\n%s", i, inj.Op, inj.Path, trace)
					if err != nil {
						require.ErrorIs(t, err, syscall.EIO, where)
						faultCheckFailed(e, op, prev, clean, where)
						require.NoError(t, op.retry(e), "retry after %s", where)
					} else {
						require.False(t, faultMustFail(e, inj), "an injected failure of a required step was swallowed; %s", where)
						require.Equal(t, clean, e.readLog(), "a swallowed best-effort failure must not change the result; %s", where)
					}
					faultFinish(e, op, &inj, where)
				}
			})
		}
	}
}

// faultCheckFailed checks the state a failed operation leaves: the log as
// it was (a failed repair may have cut the torn suffix and re-written
// recovered records), readers seeing what they saw before, and no lease
// left by a create that failed.
func faultCheckFailed(e *faultEnv, op faultOp, prev, clean []byte, where string) {
	t := e.t
	data := e.readLog()
	repaired := op.repair && !bytes.Equal(prev, data)
	if repaired {
		require.True(t, bytes.HasPrefix(clean, data) && int64(len(data)) >= e.committed,
			"a failed repair may only have cut the torn tail and re-written recovered records; %s", where)
	} else {
		require.Equal(t, prev, data, "a failed operation must leave the log as it was; %s", where)
	}
	if op.name == "close" {
		return
	}
	if e.h == nil {
		_, err := os.Stat(filepath.Join(filepath.Dir(e.path), "session.lock"))
		require.ErrorIs(t, err, os.ErrNotExist, "a failed create must not keep the lease; %s", where)
	}
	r, err := durStore(t, e.root, e.comp, nil).Open(e.ctx(), durID, jsonl.AccessRead, jsonl.OpenOptions{})
	if e.before == nil {
		// Nothing stored yet: absent, or a pending session that reads as
		// empty.
		if err != nil {
			require.ErrorIs(t, err, wire.ErrNotFound, where)
			return
		}
		got, err := r.Read(e.ctx(), 0, -1)
		require.NoError(t, err, where)
		require.Empty(t, got, where)
		return
	}
	require.NoError(t, err, where)
	got, err := r.Read(e.ctx(), 0, -1)
	require.NoError(t, err, where)
	if repaired {
		// Between the cut of a torn frame and the re-write of its recovered
		// records, those records live only in the writer's memory.
		require.GreaterOrEqual(t, len(got), int(e.committedEvents), where)
		require.LessOrEqual(t, len(got), len(e.before), where)
		durRequireEvents(t, e.before[:len(got)], got, where)
		return
	}
	durRequireEvents(t, e.before, got, where)
}

// faultMustFail reports whether a failure of the recorded operation must
// fail the store operation: a write, fsync or truncation of the log, the
// publication link, or an fsync of the session directory.
func faultMustFail(e *faultEnv, r faultfs.Record) bool {
	switch r.Op {
	case faultfs.OpWrite, faultfs.OpSync, faultfs.OpTruncate:
		return r.Path == e.path || r.Path == filepath.Dir(e.path) || strings.HasSuffix(r.Path, ".tmp") && strings.Contains(filepath.Base(r.Path), "session.")
	case faultfs.OpLink:
		return true
	}
	return false
}

// faultFinish closes the operation's handle and checks what every outcome
// must leave behind: no lease, a revoked handle id, the expected events, a
// log that a new writer can extend, and no temp files but the one whose
// best-effort removal inj failed (temp names are random and never read, so
// such a leftover trips no later operation).
func faultFinish(e *faultEnv, op faultOp, inj *faultfs.Record, where string) {
	t := e.t
	ctx := e.ctx()
	if e.h != nil && !e.closed {
		require.NoError(t, e.h.Close(ctx), where)
	} else if e.h == nil {
		require.NoError(t, e.store.CloseHandle(ctx, jsonl.HandleRef{SessionID: durID, HandleID: e.handle, Access: jsonl.AccessWrite}), where)
	}
	dir := filepath.Dir(e.path)
	_, err := os.Stat(filepath.Join(dir, "session.lock"))
	require.ErrorIs(t, err, os.ErrNotExist, "the lease must be gone after close; %s", where)

	fresh := durStore(t, e.root, e.comp, nil)
	_, err = fresh.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: e.handle})
	require.ErrorIs(t, err, wire.ErrHandleRevoked, "a closed handle id must be revoked; %s", where)

	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) && e.final == nil {
		return // a created session closed before it materialized is erased
	}
	require.NoError(t, err, where)
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".tmp") {
			continue
		}
		bestEffort := inj != nil && inj.Op == faultfs.OpRemove && inj.Path == filepath.Join(dir, ent.Name())
		require.True(t, bestEffort, "temp file %s left behind; %s", ent.Name(), where)
	}
	if op.summary {
		sum, ok, err := fresh.ReadSummary(ctx, durID)
		require.NoError(t, err, where)
		require.True(t, ok, where)
		require.Equal(t, faultTitle, sum.Title, "the summary title was lost; %s", where)
	}

	final := e.final
	if op.name == "flush" {
		final = []session.Event{}
	}
	w, err := fresh.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "next-writer"})
	require.NoError(t, err, where)
	got, err := w.Read(ctx, 0, -1)
	require.NoError(t, err, where)
	durRequireEvents(t, final, got, where)
	more := durSeqEvents(t, int64(len(final)), 2)
	require.NoError(t, w.Append(ctx, more), where)
	require.NoError(t, w.Close(ctx), where)
	r, err := durStore(t, e.root, e.comp, nil).Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err, where)
	got, err = r.Read(ctx, 0, -1)
	require.NoError(t, err, where)
	durRequireEvents(t, append(append([]session.Event(nil), final...), more...), got, where)
	require.NoError(t, session.CheckContiguous(durID, 0, got), where)
}

// TestFaultENOSPCOnAppendFsync pins FORMAT.md §7.5: a simulated ENOSPC on the
// fsync of an append restores the file size, and retrying the same batch
// yields contiguous seqs 0..7.
func TestFaultENOSPCOnAppendFsync(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			ffs := faultfs.New(nil)
			s := durStore(t, root, comp, ffs)
			h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "writer"})
			require.NoError(t, err)
			require.NoError(t, h.Append(ctx, durSeqEvents(t, 0, 4)))
			path := durLogPath(t, root, comp)
			fi, err := os.Stat(path)
			require.NoError(t, err)

			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: filepath.Base(path), Err: syscall.ENOSPC, Times: 1})
			err = h.Append(ctx, durSeqEvents(t, 4, 4))
			require.ErrorIs(t, err, syscall.ENOSPC)
			after, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, fi.Size(), after.Size(), "the failed append must be rolled back")
			require.Equal(t, int64(4), h.NextSeq())

			require.NoError(t, h.Append(ctx, durSeqEvents(t, 4, 4)))
			require.NoError(t, h.Close(ctx))
			r, err := durStore(t, root, comp, nil).Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
			require.NoError(t, err)
			got, err := r.Read(ctx, 0, -1)
			require.NoError(t, err)
			durRequireEvents(t, durSeqEvents(t, 0, 8), got)
		})
	}
}

// TestFaultCrashDuringAppend crashes the process at every filesystem
// operation of an append. A fresh store must then find either the old or
// the new events, never part of the batch; a torn write leaves a fragment
// that the next writer cuts.
func TestFaultCrashDuringAppend(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			dir := filepath.Join(durScratchDir(t), "env")
			old, all := durSeqEvents(t, 0, 4), durSeqEvents(t, 0, 8)
			setup := func() *faultEnv {
				e := newFaultEnv(t, comp, dir)
				h, err := e.store.Create(e.ctx(), durHeader(), jsonl.CreateOptions{HandleID: e.handle})
				require.NoError(t, err)
				require.NoError(t, h.Append(e.ctx(), old))
				e.h = h
				return e
			}
			e := setup()
			e.ffs.Reset()
			require.NoError(t, e.h.Append(e.ctx(), all[4:]))
			n := e.ffs.Count()
			// The bytes the append writes to the log, for torn writes.
			var body []byte
			{
				e := setup()
				prev := e.readLog()
				require.NoError(t, e.h.Append(e.ctx(), all[4:]))
				body = e.readLog()[len(prev):]
			}
			// Torn writes end inside the batch's first record (raw) or
			// inside its frame's first block (zstd): FORMAT.md §4.3 and §4.4 keep
			// the complete records of a torn batch, so only a fragment
			// proves that a partial batch never reads as valid records.
			fragment := bytes.IndexByte(body, '\n') / 2
			if comp == jsonl.CompressionZstd {
				fragment = len(body) / 2
			}

			for i := 0; i < n; i++ {
				for _, torn := range []int{0, 1, fragment} {
					e := setup()
					prev := e.readLog()
					e.ffs.Reset()
					e.ffs.CrashAt(i)
					err := e.h.Append(e.ctx(), all[4:])
					recs := e.ffs.Records()
					where := fmt.Sprintf("crash at %d, torn write of %d bytes\n%s", i, torn, e.ffs.String())
					if err == nil {
						// The crash hit a step after the batch was durable.
						require.Equal(t, append(prev, body...), e.readLog(), where)
					} else {
						require.ErrorIs(t, err, faultfs.ErrCrashed, where)
					}
					crashedWrite := recs[i].Op == faultfs.OpWrite && recs[i].Path == e.path
					if torn > 0 {
						if !crashedWrite {
							continue
						}
						// The kernel wrote part of the batch before the crash.
						f, err := os.OpenFile(e.path, os.O_WRONLY|os.O_APPEND, 0)
						require.NoError(t, err)
						_, err = f.Write(body[:torn])
						require.NoError(t, err)
						require.NoError(t, f.Close())
					}
					data := e.readLog()
					require.True(t, bytes.Equal(prev, data) || bytes.Equal(append(prev, body...), data) || torn > 0 && bytes.Equal(append(prev, body[:torn]...), data), where)

					// The crashed process is gone; its owner closes the
					// handle by reference and a new writer resumes.
					s := durStore(t, e.root, comp, nil)
					require.NoError(t, s.CloseHandle(e.ctx(), e.h.Ref()), where)
					w, err := s.Open(e.ctx(), durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "after-crash"})
					require.NoError(t, err, where)
					got, err := w.Read(e.ctx(), 0, -1)
					require.NoError(t, err, where)
					switch len(got) {
					case len(old):
						durRequireEvents(t, old, got, where)
						require.NoError(t, w.Append(e.ctx(), all[4:]), where)
					case len(all):
						require.Zero(t, torn, where)
						durRequireEvents(t, all, got, where)
					default:
						t.Fatalf("%d events after the crash, want %d or %d; %s", len(got), len(old), len(all), where)
					}
					require.NoError(t, w.Close(e.ctx()), where)
					r, err := durStore(t, e.root, comp, nil).Open(e.ctx(), durID, jsonl.AccessRead, jsonl.OpenOptions{})
					require.NoError(t, err, where)
					got, err = r.Read(e.ctx(), 0, -1)
					require.NoError(t, err, where)
					durRequireEvents(t, all, got, where)
					final := e.readLog()
					require.True(t, bytes.HasPrefix(final, prev), "committed bytes were rewritten; %s", where)
				}
			}
		})
	}
}
