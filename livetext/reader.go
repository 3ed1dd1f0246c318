package livetext

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/wire"
)

// Follower poll intervals: how often a follower reads the directory
// without a change notification. With inotify the poll only backs it up
// (a root on a network filesystem, where another host's writes raise no
// event); without it, the poll is the follower's latency.
const (
	DefaultPoll       = 250 * time.Millisecond
	DefaultPollNoWake = 20 * time.Millisecond
)

// maxLine bounds a record a follower assembles; a longer one is skipped.
const maxLine = 8 << 20

// Options tune Follow.
type Options struct {
	// Poll is how often the directory is read besides the change
	// notifications: default DefaultPoll, or DefaultPollNoWake when
	// inotify is not used.
	Poll time.Duration
	// NoNotify follows by polling alone.
	NoNotify bool
}

// ErrGone is the error that ends a Follow whose session directory is gone
// (the session was deleted). It wraps fs.ErrNotExist.
var ErrGone = fmt.Errorf("livetext: the session directory is gone: %w", fs.ErrNotExist)

// Follow follows the live text of the session whose directory is dir (find
// it with the store's id lookup: jsonl.Store.SessionDir, or use Source) and
// yields its events until ctx is done (the sequence then ends without an
// error), the directory is gone (ErrGone) or reading it fails.
//
// It follows the newest live file (by turn, step, attempt), from its
// beginning: a chunk event for each chunk, an end event for its end marker.
// A reset event reports that what was shown of a call is void: a newer
// attempt of the same call replaced the file (the reset names that
// attempt, whose chunks follow from offset 0), or the attempt ended without
// storing its message, or its file went away without an end marker (the
// attempt's worker died, and a later call or EndTurn removed it). Chunks
// never repeat: a record whose text was yielded is skipped. Records that do
// not decode (the file is written without fsync and may be torn) are
// skipped.
func Follow(ctx context.Context, dir string, opts Options) iter.Seq2[wire.LiveEvent, error] {
	return func(yield func(wire.LiveEvent, error) bool) {
		var sub *subscription
		if !opts.NoNotify {
			if n, err := sharedNotifier(); err == nil {
				if sub, err = n.subscribe(dir); err != nil && errors.Is(err, fs.ErrNotExist) {
					yield(wire.LiveEvent{}, ErrGone)
					return
				}
			}
		}
		poll := opts.Poll
		if poll <= 0 {
			poll = DefaultPoll
			if sub == nil {
				poll = DefaultPollNoWake
			}
		}
		var wake <-chan struct{}
		if sub != nil {
			defer sub.close()
			wake = sub.c
		}
		t := time.NewTimer(poll)
		defer t.Stop()
		fw := &follower{dir: dir}
		defer fw.drop()
		structural := true
		for {
			err := fw.scan(structural)
			for _, e := range fw.out {
				if !yield(e, nil) {
					return
				}
			}
			fw.out = fw.out[:0]
			if err != nil {
				yield(wire.LiveEvent{}, err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-wake:
				structural = sub.structural.Swap(false)
			case <-t.C:
				structural = true
				t.Reset(poll)
			}
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	dir string
	cur *followed // the file followed, nil for none
	// shown is the call some text of which was yielded since its last
	// reset or end (shownAny false when none).
	shown    callKey
	shownAny bool
	out      []wire.LiveEvent
	buf      []byte
}

// followed is one live file a follower reads.
type followed struct {
	key     callKey
	path    string
	f       *os.File // nil once ended or unreadable
	fi      os.FileInfo
	partial []byte
	skip    bool // dropping the rest of an overlong record
	started bool // the header line was read
	ended   bool
	next    [2]int64
}

// drop closes the file followed.
func (fw *follower) drop() {
	if fw.cur != nil && fw.cur.f != nil {
		_ = fw.cur.f.Close()
		fw.cur.f = nil
	}
}

func (fw *follower) emit(e wire.LiveEvent) { fw.out = append(fw.out, e) }

// reset yields a reset of the call shown, naming attempt, if anything of
// it was shown.
func (fw *follower) reset(attempt int32) {
	if !fw.shownAny {
		return
	}
	fw.shownAny = false
	fw.emit(wire.LiveEvent{Event: wire.LiveReset, Turn: fw.shown.turn, Step: fw.shown.step, Attempt: attempt})
}

// scan reads the directory (when structural) and the file followed.
func (fw *follower) scan(structural bool) error {
	if !structural && fw.cur != nil {
		fw.read(fw.cur)
		return nil
	}
	var best *callKey
	for try := 0; ; try++ {
		entries, err := os.ReadDir(fw.dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if fw.cur != nil {
					fw.read(fw.cur)
					fw.leave(nil)
				}
				return ErrGone
			}
			return fmt.Errorf("livetext: %w", err)
		}
		best = nil
		for _, e := range entries {
			if k, ok := parseName(e.Name()); ok && (best == nil || best.less(k)) {
				best = &k
			}
		}
		cur := fw.cur
		if cur == nil {
			break
		}
		var fi os.FileInfo
		if best != nil && *best == cur.key {
			fi, err = os.Lstat(cur.path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("livetext: %w", err)
			}
		}
		if fi == nil || !os.SameFile(fi, cur.fi) {
			if try < 2 {
				// A listing that runs beside a create and a remove may
				// miss both (a writer creates its file before it removes
				// the older ones): list again before judging.
				continue
			}
			// Replaced or gone: what the old file holds still counts.
			fw.read(cur)
			fw.leave(best)
		}
		break
	}
	if best != nil && fw.cur == nil {
		if err := fw.open(*best); err != nil {
			return err
		}
	}
	if fw.cur != nil {
		fw.read(fw.cur)
	}
	return nil
}

// leave stops following the current file, which next replaces (nil when
// none does): a call it did not end is reset.
func (fw *follower) leave(next *callKey) {
	cur := fw.cur
	fw.drop()
	fw.cur = nil
	if cur.ended {
		return
	}
	attempt := cur.key.attempt
	if next != nil && next.sameCall(cur.key) {
		attempt = next.attempt
	}
	if fw.shownAny && fw.shown.sameCall(cur.key) {
		fw.reset(attempt)
	}
}

// open starts following the live file of k. A file that is gone or is not
// a regular file is not followed (a later scan looks again).
func (fw *follower) open(k callKey) error {
	path := filepath.Join(fw.dir, k.fileName())
	// O_NONBLOCK: a FIFO planted under the name must not block the open.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return nil
		}
		return fmt.Errorf("livetext: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		// Followed as ended: never read, never reopened while it stays.
		fw.cur = &followed{key: k, path: path, fi: fi, ended: true}
		return nil
	}
	if fw.shownAny && fw.shown.sameCall(k) && fw.shown.attempt != k.attempt {
		fw.reset(k.attempt)
	}
	fw.cur = &followed{key: k, path: path, f: f, fi: fi}
	return nil
}

// read reads what was appended to the file followed and yields its
// records.
func (fw *follower) read(cur *followed) {
	if cur.f == nil {
		return
	}
	if fw.buf == nil {
		fw.buf = make([]byte, 64<<10)
	}
	for {
		n, err := cur.f.Read(fw.buf)
		if n > 0 {
			fw.lines(cur, fw.buf[:n])
		}
		if err != nil || n < len(fw.buf) {
			if err != nil && !errors.Is(err, io.EOF) {
				// Unreadable (never expected of a regular file): stop
				// following it.
				_ = cur.f.Close()
				cur.f = nil
			}
			return
		}
	}
}

// lines splits b into records, keeping a torn last one for later.
func (fw *follower) lines(cur *followed, b []byte) {
	for len(b) > 0 && cur.f != nil {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !cur.skip {
				cur.partial = append(cur.partial, b...)
				if len(cur.partial) > maxLine {
					cur.partial, cur.skip = cur.partial[:0], true
				}
			}
			return
		}
		line := b[:i]
		b = b[i+1:]
		if cur.skip {
			cur.skip = false
			continue
		}
		if len(cur.partial) > 0 {
			line = append(cur.partial, line...)
			cur.partial = cur.partial[:0]
		}
		fw.record(cur, line)
	}
}

// record handles one complete record of the file followed.
func (fw *follower) record(cur *followed, line []byte) {
	if cur.ended {
		return
	}
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		cur.started = true
		return // torn or damaged: skipped
	}
	if !cur.started {
		cur.started = true
		if r.Live != 0 {
			return // the header: the name already told the call
		}
	}
	k := cur.key
	switch {
	case r.End != "":
		cur.ended = true
		_ = cur.f.Close()
		cur.f = nil
		if r.End == endStored {
			fw.shownAny = false
			fw.emit(wire.LiveEvent{Event: wire.LiveEnd, Turn: k.turn, Step: k.step, Attempt: k.attempt})
			return
		}
		if fw.shownAny && fw.shown.sameCall(k) {
			fw.reset(k.attempt)
		}
	case r.Offset != nil && r.Text != nil:
		i, ok := kindIndex(r.Kind)
		off, text := *r.Offset, *r.Text
		if !ok || off < 0 || text == "" {
			return
		}
		end := off + int64(len(text))
		if end <= cur.next[i] {
			return // shown already
		}
		if off < cur.next[i] {
			text, off = text[cur.next[i]-off:], cur.next[i]
		}
		cur.next[i] = end
		fw.shown, fw.shownAny = k, true
		fw.emit(wire.LiveEvent{Event: wire.LiveChunk, Turn: k.turn, Step: k.step, Attempt: k.attempt, Offset: off, Text: text, Kind: r.Kind})
	}
}
