package livetext_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/wire"
)

// follow runs Follow on dir in the background and returns its events on a
// channel, closed when the sequence ends; errs gets its error, if any.
func follow(t *testing.T, dir string, opts livetext.Options) (<-chan wire.LiveEvent, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan wire.LiveEvent, 1024)
	errs := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for e, err := range livetext.Follow(ctx, dir, opts) {
			if err != nil {
				errs <- err
				return
			}
			out <- e
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out, errs
}

// next returns the next event within d, failing the test otherwise.
func next(t *testing.T, ch <-chan wire.LiveEvent, d time.Duration) wire.LiveEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		require.True(t, ok, "the follow ended")
		return e
	case <-time.After(d):
		t.Fatalf("no live event within %s", d)
	}
	return wire.LiveEvent{}
}

// none asserts that no event arrives within d.
func none(t *testing.T, ch <-chan wire.LiveEvent, d time.Duration) {
	t.Helper()
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("unexpected live event %+v", e)
		}
	case <-time.After(d):
	}
}

func chunk(turn, step int64, attempt int32, off int64, kind, text string) wire.LiveEvent {
	return wire.LiveEvent{Event: "chunk", Turn: turn, Step: step, Attempt: attempt, Offset: off, Text: text, Kind: kind}
}

func marker(event string, turn, step int64, attempt int32) wire.LiveEvent {
	return wire.LiveEvent{Event: event, Turn: turn, Step: step, Attempt: attempt}
}

// noPoll makes inotify the only way a follower learns of a change in a
// test's time.
var noPoll = livetext.Options{Poll: time.Hour}

func liveFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if livetext.IsLiveFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestChunksReachAFollowerAtOnceAndTheEndRemovesTheFile(t *testing.T) {
	dir := t.TempDir()
	w, err := livetext.Start(dir, 3, 2, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"live.3.2.1"}, liveFiles(t, dir))
	fi, err := os.Stat(w.Path())
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

	evs, _ := follow(t, dir, noPoll)
	w.Chunk("reasoning", "thinking")
	require.Equal(t, chunk(3, 2, 1, 0, "reasoning", "thinking"), next(t, evs, time.Second))
	w.Chunk("text", "Hel")
	w.Chunk("text", "lo")
	w.Chunk("text", "")
	w.Chunk("tool-call", "{}")
	require.Equal(t, chunk(3, 2, 1, 0, "text", "Hel"), next(t, evs, time.Second))
	require.Equal(t, chunk(3, 2, 1, 3, "text", "lo"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 3, 2, 1), next(t, evs, time.Second))
	require.Empty(t, liveFiles(t, dir), "the live file is removed once the message is stored")
	none(t, evs, 100*time.Millisecond)
	require.NoError(t, w.End(true), "a second End does nothing")
	w.Chunk("text", "late") // after End: ignored, no panic
}

func TestAFollowerStartedLateReadsTheCallFromItsStart(t *testing.T) {
	dir := t.TempDir()
	w, err := livetext.Start(dir, 1, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "one ")
	w.Chunk("text", "two")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(w.Path())
		return len(b) > 0 && string(b[len(b)-1]) == "\n" && len(b) > 60
	}, time.Second, time.Millisecond)
	evs, _ := follow(t, dir, noPoll)
	require.Equal(t, chunk(1, 1, 1, 0, "text", "one "), next(t, evs, time.Second))
	require.Equal(t, chunk(1, 1, 1, 4, "text", "two"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 1, 1, 1), next(t, evs, time.Second))
}

func TestARetriedAttemptResetsAndNeverDuplicates(t *testing.T) {
	dir := t.TempDir()
	evs, _ := follow(t, dir, noPoll)
	w1, err := livetext.Start(dir, 4, 1, 1)
	require.NoError(t, err)
	w1.Chunk("text", "Hel")
	require.Equal(t, chunk(4, 1, 1, 0, "text", "Hel"), next(t, evs, time.Second))
	// The worker of attempt 1 is lost; attempt 2 replaces its file.
	w2, err := livetext.Start(dir, 4, 1, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"live.4.1.2"}, liveFiles(t, dir))
	require.Equal(t, marker("reset", 4, 1, 2), next(t, evs, time.Second))
	w2.Chunk("text", "Hello")
	require.Equal(t, chunk(4, 1, 2, 0, "text", "Hello"), next(t, evs, time.Second))
	// The zombie attempt 1 writes on, into its unlinked file: unseen.
	w1.Chunk("text", "lo, zombie")
	require.NoError(t, w1.End(true))
	none(t, evs, 100*time.Millisecond)
	w2.Chunk("text", " world")
	require.Equal(t, chunk(4, 1, 2, 5, "text", " world"), next(t, evs, time.Second))
	require.NoError(t, w2.End(true))
	require.Equal(t, marker("end", 4, 1, 2), next(t, evs, time.Second))
}

func TestAnAbandonedAttemptResetsWhatItShowed(t *testing.T) {
	dir := t.TempDir()
	evs, _ := follow(t, dir, noPoll)
	w, err := livetext.Start(dir, 2, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "partial")
	require.Equal(t, chunk(2, 1, 1, 0, "text", "partial"), next(t, evs, time.Second))
	require.NoError(t, w.End(false))
	require.Equal(t, marker("reset", 2, 1, 1), next(t, evs, time.Second))
	require.Empty(t, liveFiles(t, dir))
	none(t, evs, 100*time.Millisecond)
}

// writeStale leaves the live file of a killed worker: a header and a chunk,
// no end marker, nobody writing.
func writeStale(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
}

func TestAKilledWorkersStaleFileIsResetWhenTheNextCallReplacesIt(t *testing.T) {
	dir := t.TempDir()
	writeStale(t, dir, "live.5.1.1", `{"live":1,"turn":5,"step":1,"attempt":1,"startedMs":1}`+"\n"+
		`{"kind":"text","offset":0,"text":"dead"}`+"\n"+`{"kind":"text","offs`)
	evs, _ := follow(t, dir, noPoll)
	require.Equal(t, chunk(5, 1, 1, 0, "text", "dead"), next(t, evs, time.Second))
	none(t, evs, 50*time.Millisecond)
	// The next turn's first call removes it.
	w, err := livetext.Start(dir, 6, 1, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"live.6.1.1"}, liveFiles(t, dir))
	require.Equal(t, marker("reset", 5, 1, 1), next(t, evs, time.Second))
	w.Chunk("text", "alive")
	require.Equal(t, chunk(6, 1, 1, 0, "text", "alive"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 6, 1, 1), next(t, evs, time.Second))
}

func TestClearRemovesOnlyLiveFiles(t *testing.T) {
	dir := t.TempDir()
	writeStale(t, dir, "live.5.1.1", "")
	writeStale(t, dir, "live.5.2.3", "")
	writeStale(t, dir, "session.v3.jsonl", "keep")
	writeStale(t, dir, "live.notes", "keep")
	n, err := livetext.Clear(dir)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"live.notes", "session.v3.jsonl"}, names)
	n, err = livetext.Clear(filepath.Join(dir, "absent"))
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestBadContentIsSkippedNeverFatal(t *testing.T) {
	dir := t.TempDir()
	body := "not json at all\n" + // a header torn into garbage
		`{"kind":"text","offset":0,"text":"ok"}` + "\n" +
		`{"kind":"text","offset":-4,"text":"neg"}` + "\n" +
		`{"kind":"sound","offset":2,"text":"x"}` + "\n" +
		`{"kind":"text","offset":0,"text":"ok"}` + "\n" + // a repeat: shown already
		`{"kind":"text","offset":1,"text":"k!"}` + "\n" + // overlaps: only "!" is new
		"\x00\x00\x00\n" +
		`{"kind":"text","offset":3,"text":"?"}` + "\n" +
		`{"kind":"text","offset":4,"text":"torn`
	writeStale(t, dir, "live.1.1.1", body)
	// Names that only look like live files, and a FIFO under a live name.
	writeStale(t, dir, "live.01.1.1", `{"kind":"text","offset":0,"text":"no"}`+"\n")
	writeStale(t, dir, "live.1.1", `{"kind":"text","offset":0,"text":"no"}`+"\n")
	evs, _ := follow(t, dir, noPoll)
	require.Equal(t, chunk(1, 1, 1, 0, "text", "ok"), next(t, evs, time.Second))
	require.Equal(t, chunk(1, 1, 1, 2, "text", "!"), next(t, evs, time.Second))
	require.Equal(t, chunk(1, 1, 1, 3, "text", "?"), next(t, evs, time.Second))
	none(t, evs, 50*time.Millisecond)
	// The torn record completes.
	f, err := os.OpenFile(filepath.Join(dir, "live.1.1.1"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("ed\"}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, chunk(1, 1, 1, 4, "text", "torned"), next(t, evs, time.Second))

	// A FIFO under a newer call's name: the older call is replaced, the
	// FIFO never read (nor does opening it block the follower).
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "live.2.1.1"), 0o600))
	require.Equal(t, marker("reset", 1, 1, 1), next(t, evs, time.Second))
	none(t, evs, 100*time.Millisecond)
	// The follower is alive: a real file after the FIFO is read.
	w, err := livetext.Start(dir, 3, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "fine")
	require.Equal(t, chunk(3, 1, 1, 0, "text", "fine"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 3, 1, 1), next(t, evs, time.Second))
}

func TestPollingAloneFollows(t *testing.T) {
	dir := t.TempDir()
	evs, _ := follow(t, dir, livetext.Options{NoNotify: true, Poll: 5 * time.Millisecond})
	w, err := livetext.Start(dir, 1, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "polled")
	require.Equal(t, chunk(1, 1, 1, 0, "text", "polled"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 1, 1, 1), next(t, evs, time.Second))
}

func TestAGoneDirectoryEndsTheFollow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "session")
	require.NoError(t, os.Mkdir(dir, 0o700))
	evs, errs := follow(t, dir, noPoll)
	w, err := livetext.Start(dir, 1, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "bye")
	require.Equal(t, chunk(1, 1, 1, 0, "text", "bye"), next(t, evs, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 1, 1, 1), next(t, evs, time.Second))
	// (A writer's open file would keep the directory's inode, and its
	// IN_DELETE_SELF, until it is closed; the poll would see it then.)
	require.NoError(t, os.RemoveAll(dir))
	select {
	case err := <-errs:
		require.ErrorIs(t, err, livetext.ErrGone)
		require.ErrorIs(t, err, fs.ErrNotExist)
	case <-time.After(2 * time.Second):
		t.Fatal("the follow did not end")
	}

	_, errs = follow(t, filepath.Join(dir, "never"), noPoll)
	require.ErrorIs(t, <-errs, livetext.ErrGone)
}

func TestAWriterThatCannotStartIsNilAndHarmless(t *testing.T) {
	w, err := livetext.Start(filepath.Join(t.TempDir(), "absent"), 1, 1, 1)
	require.Error(t, err)
	require.True(t, errors.Is(err, fs.ErrNotExist))
	require.Nil(t, w)
	w.Chunk("text", "x")
	require.NoError(t, w.End(true))
	require.Zero(t, w.Dropped())
	_, err = livetext.Start(t.TempDir(), 0, 1, 1)
	require.Error(t, err)
}

func TestManyFollowersShareTheNotifier(t *testing.T) {
	// More followers than the kernel's default inotify instances (128).
	const n = 150
	dirs := make([]string, n)
	chans := make([]<-chan wire.LiveEvent, n)
	root := t.TempDir()
	for i := range dirs {
		dirs[i] = filepath.Join(root, string(rune('a'+i%26))+string(rune('a'+i/26)))
		require.NoError(t, os.Mkdir(dirs[i], 0o700))
		chans[i], _ = follow(t, dirs[i], noPoll)
	}
	for i := range dirs {
		w, err := livetext.Start(dirs[i], 1, 1, 1)
		require.NoError(t, err)
		w.Chunk("text", "x")
		require.Equal(t, chunk(1, 1, 1, 0, "text", "x"), next(t, chans[i], 2*time.Second), "follower %d", i)
		require.NoError(t, w.End(true))
	}
}

func TestTwoFollowersOfOneSessionShareItsWatch(t *testing.T) {
	dir := t.TempDir()
	first, _ := follow(t, dir, noPoll)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan wire.LiveEvent, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e, err := range livetext.Follow(ctx, dir, noPoll) {
			if err != nil {
				return
			}
			second <- e
		}
	}()
	w, err := livetext.Start(dir, 1, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "both")
	require.Equal(t, chunk(1, 1, 1, 0, "text", "both"), next(t, first, time.Second))
	require.Equal(t, chunk(1, 1, 1, 0, "text", "both"), next(t, second, time.Second))
	// The second follower stops: the first still hears of every change.
	cancel()
	<-done
	w.Chunk("text", " still")
	require.Equal(t, chunk(1, 1, 1, 4, "text", " still"), next(t, first, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 1, 1, 1), next(t, first, time.Second))
}
