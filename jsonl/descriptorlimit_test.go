package jsonl_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// countingFS counts the files the store has open through it, and the most
// it ever had open at once. onOpen, when set, runs before a file is opened.
type countingFS struct {
	jsonl.OSFS
	mu     sync.Mutex
	open   int
	peak   int
	files  map[*countedFile]bool
	onOpen func(name string, flag int)
}

// openNames lists the names of the open files, sorted. The caller holds mu.
func (c *countingFS) openNames() []string {
	var out []string
	for f := range c.files {
		out = append(out, f.Name())
	}
	sort.Strings(out)
	return out
}

type countedFile struct {
	jsonl.File
	fs   *countingFS
	once sync.Once
}

func (f *countedFile) Close() error {
	f.once.Do(func() {
		f.fs.mu.Lock()
		f.fs.open--
		delete(f.fs.files, f)
		f.fs.mu.Unlock()
	})
	return f.File.Close()
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	if c.onOpen != nil {
		c.onOpen(name, flag)
	}
	f, err := c.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	cf := &countedFile{File: f, fs: c}
	c.mu.Lock()
	c.open++
	c.peak = max(c.peak, c.open)
	if c.files == nil {
		c.files = map[*countedFile]bool{}
	}
	c.files[cf] = true
	c.mu.Unlock()
	return cf, nil
}

func (c *countingFS) counts() (open, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak
}

// limitedStore opens a store over root with a descriptor limit.
func limitedStore(t *testing.T, root string, limit int, fsys jsonl.FS) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, FS: fsys, Logger: durQuiet, MaxDescriptors: limit})
	require.NoError(t, err)
	return st
}

// fleetEvent is the event at seq of session n.
func fleetEvent(t *testing.T, n int, seq int64) session.Event {
	t.Helper()
	e, err := session.NewEvent(wire.TypeSystemMessage, seq, 5_000+seq, durObj{"text": fmt.Sprintf("session %d event %d", n, seq)})
	require.NoError(t, err)
	return e
}

// fleetHeader is the header of session n.
func fleetHeader(n int) wire.Header {
	return wire.Header{Version: wire.FormatVersion, ID: fmt.Sprintf("fleet-%02d", n), CreatedAt: 1_700_000_000_000, Cwd: "/work/fleet"}
}

// fleetLogPath is the log of session n under root (no compression).
func fleetLogPath(t *testing.T, root string, n int) string {
	t.Helper()
	project, err := jsonl.ProjectKey("/work/fleet")
	require.NoError(t, err)
	return filepath.Join(root, project, fleetHeader(n).ID, generationName(jsonl.CompressionNone))
}

// TestDescriptorLimitManySessions appends to 20 live sessions in random
// order through a store limited to 4 descriptors: every append succeeds,
// between appends the store never keeps more than 4 files open, during one
// at most the file it publishes and its directory come on top, and every
// log holds exactly what was appended to it.
func TestDescriptorLimitManySessions(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fsys := &countingFS{}
	st := limitedStore(t, root, 4, fsys)
	const sessions = 20
	handles := make([]*jsonl.Handle, sessions)
	next := make([]int64, sessions)
	for n := range sessions {
		h, err := st.Create(ctx, fleetHeader(n), jsonl.CreateOptions{HandleID: fmt.Sprintf("fleet-handle-%d", n)})
		require.NoError(t, err)
		handles[n] = h
	}
	rng := rand.New(rand.NewPCG(7, 15))
	for range 400 {
		n := rng.IntN(sessions)
		require.NoError(t, handles[n].Append(ctx, []session.Event{fleetEvent(t, n, next[n])}), "session %d at %d", n, next[n])
		next[n]++
		open, _ := fsys.counts()
		kept, limit := st.OpenDescriptors()
		require.Equal(t, 4, limit)
		require.LessOrEqual(t, open, 4, "files open between appends")
		require.Equal(t, open, kept, "files open against the store's count")
	}
	_, peak := fsys.counts()
	require.LessOrEqual(t, peak, 4+2, "files open at once during an append")
	for n := range sessions {
		got := readAll(t, durStore(t, root, jsonl.CompressionNone, nil), fleetHeader(n).ID)
		require.Len(t, got, int(next[n]), "session %d", n)
		for i, e := range got {
			require.Equal(t, line(t, fleetEvent(t, n, int64(i))), line(t, e), "session %d event %d", n, i)
		}
	}
}

// TestDescriptorLimitConcurrentAppends appends to 20 sessions from 8
// goroutines through a store limited to 4 descriptors (fewer than the
// appends in flight need): every append succeeds, and once they end the
// store keeps no more than the limit open.
func TestDescriptorLimitConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fsys := &countingFS{}
	st := limitedStore(t, root, 4, fsys)
	const sessions, workers, rounds = 20, 8, 15
	handles := make([]*jsonl.Handle, sessions)
	for n := range sessions {
		h, err := st.Create(ctx, fleetHeader(n), jsonl.CreateOptions{HandleID: fmt.Sprintf("fleet-handle-%d", n)})
		require.NoError(t, err)
		handles[n] = h
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				// Worker w owns sessions w, w+8, w+16: appends to one
				// session stay in order.
				for n := w; n < sessions; n += workers {
					e, err := session.NewEvent(wire.TypeSystemMessage, int64(r), 5_000+int64(r), durObj{"text": fmt.Sprintf("session %d event %d", n, r)})
					if err == nil {
						err = handles[n].Append(ctx, []session.Event{e})
					}
					if err != nil {
						errs <- fmt.Errorf("session %d round %d: %w", n, r, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	open, _ := fsys.counts()
	require.LessOrEqual(t, open, 4)
	kept, _ := st.OpenDescriptors()
	require.Equal(t, open, kept)
	for n := range sessions {
		require.Len(t, readAll(t, durStore(t, root, jsonl.CompressionNone, nil), fleetHeader(n).ID), rounds, "session %d", n)
	}
}

// releasedPair makes sessions 0 and 1 through a store limited to two
// descriptors and appends twice to 0 (the first append publishes the log,
// the second opens it), then twice to 1, so that session 0 has given its
// lease and log descriptors back when it returns.
func releasedPair(t *testing.T, root string) (*jsonl.Store, []*jsonl.Handle) {
	t.Helper()
	ctx := context.Background()
	fsys := &countingFS{}
	st := limitedStore(t, root, 2, fsys)
	var hs []*jsonl.Handle
	for n := range 2 {
		h, err := st.Create(ctx, fleetHeader(n), jsonl.CreateOptions{HandleID: fmt.Sprintf("pair-handle-%d", n)})
		require.NoError(t, err)
		require.NoError(t, h.Append(ctx, []session.Event{fleetEvent(t, n, 0)}))
		require.NoError(t, h.Append(ctx, []session.Event{fleetEvent(t, n, 1)}))
		hs = append(hs, h)
	}
	kept, _ := st.OpenDescriptors()
	require.Equal(t, 2, kept)
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	require.Equal(t, []string{filepath.Join(filepath.Dir(fleetLogPath(t, root, 1)), "session.lock"), fleetLogPath(t, root, 1)}, fsys.openNames(), "only session 1's lease and log are open")
	return st, hs
}

// TestDescriptorLimitReleasedSessionLeaseTaken: while session 0's
// descriptors are released, its lease disappears (removed by hand, the
// handle id not revoked) and another process opens the session; session
// 0's next append is refused with ErrOwnershipLost and the log holds only
// what the new owner wrote.
func TestDescriptorLimitReleasedSessionLeaseTaken(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(fleetLogPath(t, root, 0)), "session.lock")))
	other := durStore(t, root, jsonl.CompressionNone, nil)
	taker, err := other.Open(ctx, fleetHeader(0).ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "taker"})
	require.NoError(t, err)
	require.NoError(t, taker.Append(ctx, []session.Event{fleetEvent(t, 9, 2)}))

	err = hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)})
	requireCode(t, err, wire.ErrOwnershipLost)
	got := readAll(t, durStore(t, root, jsonl.CompressionNone, nil), fleetHeader(0).ID)
	require.Len(t, got, 3)
	require.Equal(t, line(t, fleetEvent(t, 9, 2)), line(t, got[2]))
}

// TestDescriptorLimitReleasedSessionForceUnlocked: while session 0's
// descriptors are released, another process forces its lease away (which
// revokes the handle id) and opens it; session 0's next append finds the
// lease naming another handle and is refused with ErrOwnershipLost
// (FORMAT.md §6.1: its own process finds the lease gone), and the log holds
// only what the new owner wrote.
func TestDescriptorLimitReleasedSessionForceUnlocked(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	other := durStore(t, root, jsonl.CompressionNone, nil)
	_, err := other.ForceUnlock(ctx, fleetHeader(0).ID)
	require.NoError(t, err)
	taker, err := other.Open(ctx, fleetHeader(0).ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "taker"})
	require.NoError(t, err)
	require.NoError(t, taker.Append(ctx, []session.Event{fleetEvent(t, 9, 2)}))

	err = hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)})
	requireCode(t, err, wire.ErrOwnershipLost)
	got := readAll(t, durStore(t, root, jsonl.CompressionNone, nil), fleetHeader(0).ID)
	require.Len(t, got, 3)
	require.Equal(t, line(t, fleetEvent(t, 9, 2)), line(t, got[2]))
}

// TestDescriptorLimitReleasedSessionRevoked: session 0's handle id is
// revoked (a Close elsewhere that recorded the revocation and stopped before
// removing the lease, which still names the handle) while its descriptors
// are released; its next append is refused with ErrHandleClosed and
// nothing is written.
func TestDescriptorLimitReleasedSessionRevoked(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	other := durStore(t, root, jsonl.CompressionNone, nil)
	require.NoError(t, other.RevokeForTest(fleetHeader(0).ID, hs[0].Ref().HandleID))
	path := fleetLogPath(t, root, 0)
	before := readFile(t, path)

	err := hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)})
	requireCode(t, err, wire.ErrHandleClosed)
	require.Equal(t, string(before), string(readFile(t, path)))
}

// TestDescriptorLimitReleasedSessionClosedElsewhere: session 0's handle is
// closed by reference in another process (revoked, lease removed) while its
// descriptors are released; its next append finds the lease gone and is
// refused with ErrOwnershipLost, as a handle that kept its descriptors is.
func TestDescriptorLimitReleasedSessionClosedElsewhere(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	other := durStore(t, root, jsonl.CompressionNone, nil)
	require.NoError(t, other.CloseHandle(ctx, hs[0].Ref()))

	err := hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)})
	requireCode(t, err, wire.ErrOwnershipLost)
	require.Len(t, readAll(t, other, fleetHeader(0).ID), 2)
}

// TestDescriptorLimitReleasedSessionLogAppendedElsewhere: while session 0's
// descriptors are released, another process appends to its log (an
// attempt of the same handle elsewhere; then a writer that ignores the
// lease). Session 0's next append, which continues the log it knew, is
// refused with ErrSeqMismatch instead of landing after the other writer's
// records; an append that continues the log as it now is succeeds.
func TestDescriptorLimitReleasedSessionLogAppendedElsewhere(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	other := durStore(t, root, jsonl.CompressionNone, nil)
	require.NoError(t, other.Attach(hs[0].Ref()).Append(ctx, []session.Event{fleetEvent(t, 7, 2)}))

	err := hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)})
	requireCode(t, err, wire.ErrSeqMismatch)
	got := readAll(t, other, fleetHeader(0).ID)
	require.Len(t, got, 3)
	require.Equal(t, line(t, fleetEvent(t, 7, 2)), line(t, got[2]))

	// Release session 0 again, then a raw append behind the lease's back.
	require.NoError(t, hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 3)}))
	require.NoError(t, hs[1].Append(ctx, []session.Event{fleetEvent(t, 1, 2)}))
	appendFile(t, fleetLogPath(t, root, 0), []byte(line(t, fleetEvent(t, 8, 4))+"\n"))
	err = hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 4)})
	requireCode(t, err, wire.ErrSeqMismatch)
	got = readAll(t, other, fleetHeader(0).ID)
	require.Len(t, got, 5)
	require.Equal(t, line(t, fleetEvent(t, 8, 4)), line(t, got[4]))
	require.NoError(t, hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 5)}))
	require.Len(t, readAll(t, other, fleetHeader(0).ID), 6)
}

// TestDescriptorLimitReopenedLogChangedUnderLease: a released session's log
// grows between the check under the lease and the reopen of its descriptor
// (a writer that ignores the lease, racing the append). The append is
// refused with ErrOwnershipLost and writes nothing; the next append re-reads
// the log.
func TestDescriptorLimitReopenedLogChangedUnderLease(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fsys := &countingFS{}
	st := limitedStore(t, root, 2, fsys)
	var hs []*jsonl.Handle
	for n := range 2 {
		h, err := st.Create(ctx, fleetHeader(n), jsonl.CreateOptions{HandleID: fmt.Sprintf("race-handle-%d", n)})
		require.NoError(t, err)
		require.NoError(t, h.Append(ctx, []session.Event{fleetEvent(t, n, 0)}))
		hs = append(hs, h)
	}
	path := fleetLogPath(t, root, 0)
	intruder := line(t, fleetEvent(t, 6, 1)) + "\n"
	var fired bool
	fsys.onOpen = func(name string, flag int) {
		if name == path && flag&os.O_APPEND != 0 && !fired {
			fired = true
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString(intruder)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
	err := hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 1)})
	require.True(t, fired)
	requireCode(t, err, wire.ErrOwnershipLost)
	body := string(readFile(t, path))
	require.True(t, strings.HasSuffix(body, intruder), "the log ends with the intruder's record")
	require.NotContains(t, body, "session 0 event 1")
	err = hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 1)})
	requireCode(t, err, wire.ErrSeqMismatch)
}

// TestDescriptorLimitRestartAttaches: a process whose store released a
// session's descriptors stops; a new process attaches the handle by
// reference and goes on appending, and the old handle, if its process
// lived on, reads its own records back.
func TestDescriptorLimitRestartAttaches(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, hs := releasedPair(t, root)
	next := limitedStore(t, root, 2, nil)
	att := next.Attach(hs[0].Ref())
	require.NoError(t, att.Append(ctx, []session.Event{fleetEvent(t, 0, 2)}))
	require.Equal(t, int64(3), att.NextSeq())
	require.NoError(t, hs[0].Append(ctx, []session.Event{fleetEvent(t, 0, 2)}), "a re-append of the same batch is idempotent")
	require.Len(t, readAll(t, next, fleetHeader(0).ID), 3)
}

// TestDescriptorLimitUnlimited: without a limit every live session keeps
// its lease and log descriptors.
func TestDescriptorLimitUnlimited(t *testing.T) {
	ctx := context.Background()
	st := limitedStore(t, t.TempDir(), 0, nil)
	for n := range 5 {
		h, err := st.Create(ctx, fleetHeader(n), jsonl.CreateOptions{HandleID: fmt.Sprintf("free-handle-%d", n)})
		require.NoError(t, err)
		require.NoError(t, h.Append(ctx, []session.Event{fleetEvent(t, n, 0)}))
		require.NoError(t, h.Append(ctx, []session.Event{fleetEvent(t, n, 1)}))
	}
	kept, limit := st.OpenDescriptors()
	require.Equal(t, 0, limit)
	require.Equal(t, 10, kept)
}

// TestDescriptorLimitNegative refuses a negative limit.
func TestDescriptorLimitNegative(t *testing.T) {
	_, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), MaxDescriptors: -1})
	require.EqualError(t, err, "jsonl: the descriptor limit -1 is negative")
}

// TestDescriptorLimitOvershootGivenBack: when every handle holding
// descriptors is in an operation, an append opens its own over the limit;
// the excess is given back once the operations end.
func TestDescriptorLimitOvershootGivenBack(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fsys := &countingFS{}
	st := limitedStore(t, root, 2, fsys)
	a, err := st.Create(ctx, fleetHeader(0), jsonl.CreateOptions{HandleID: "overshoot-a"})
	require.NoError(t, err)
	require.NoError(t, a.Append(ctx, []session.Event{fleetEvent(t, 0, 0)})) // a keeps its lease
	pathA := fleetLogPath(t, root, 0)
	blocked, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys.onOpen = func(name string, flag int) {
		if name == pathA && flag&os.O_APPEND != 0 {
			once.Do(func() {
				close(blocked)
				<-unblock
			})
		}
	}
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, []session.Event{fleetEvent(t, 0, 1)}) }()
	<-blocked // a is in its append, holding its lease, about to open its log

	b, err := st.Create(ctx, fleetHeader(1), jsonl.CreateOptions{HandleID: "overshoot-b"})
	require.NoError(t, err)
	require.NoError(t, b.Append(ctx, []session.Event{fleetEvent(t, 1, 0)}))
	require.NoError(t, b.Append(ctx, []session.Event{fleetEvent(t, 1, 1)})) // over the limit: a is busy
	kept, _ := st.OpenDescriptors()
	require.Equal(t, 3, kept, "a's lease, b's lease and log")

	close(unblock)
	require.NoError(t, <-done)
	kept, _ = st.OpenDescriptors()
	open, _ := fsys.counts()
	require.Equal(t, 2, kept, "the excess is given back when a's append ends")
	require.Equal(t, 2, open)
}
