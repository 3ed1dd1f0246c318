package livetext

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// MaxBuffered bounds the chunks a Writer holds that its flusher has not
// written yet. A chunk that would exceed it is dropped: followers see a gap
// in its kind's offsets, and the stored message still holds the text.
const MaxBuffered = 1 << 20

// Writer writes the live file of one attempt of one model call. Chunk
// hands the chunk to a flusher goroutine that writes whatever is pending
// in one write(2), without fsync, so that a chunk reaches the file within
// microseconds and the stream is never held up by the disk; End writes the
// end marker and removes the file. A nil *Writer does nothing: a live file
// that cannot be written never fails the model call.
//
// Chunk and End are safe for concurrent use, but a call's chunks must be
// handed over in stream order.
type Writer struct {
	path string
	f    *os.File

	mu      sync.Mutex
	buf     []byte   // chunks not written yet
	offsets [2]int64 // next offset per kind (kindIndex)
	dropped int64    // chunks dropped for MaxBuffered
	ended   bool     // End was called
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	werr    error // the first write error; nothing is written after it
}

// Start creates the live file of attempt attempt of the model call of
// (turn, step) in the session directory dir, with its header written, and
// then removes the live files of earlier calls and attempts (stale files of
// crashed attempts). The file is created 0600, like the log.
func Start(dir string, turn, step int64, attempt int32) (*Writer, error) {
	k := callKey{turn: turn, step: step, attempt: attempt}
	if turn < 1 || step < 1 || attempt < 1 {
		return nil, fmt.Errorf("livetext: no live file for turn %d step %d attempt %d", turn, step, attempt)
	}
	path := filepath.Join(dir, k.fileName())
	f, err := create(path)
	if errors.Is(err, fs.ErrExist) {
		// The same attempt number ran before (a workflow run that went
		// on with the turn): the newest start wins.
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, fmt.Errorf("livetext: %w", rerr)
		}
		f, err = create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("livetext: create %s: %w", path, err)
	}
	h, _ := json.Marshal(header{Live: formatVersion, Turn: turn, Step: step, Attempt: attempt, StartedMs: time.Now().UnixMilli()})
	if _, err := f.Write(append(h, '\n')); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("livetext: write %s: %w", path, err)
	}
	// The earlier files go once this one exists, so that a follower never
	// sees the session without a live file in between (it would take the
	// replaced attempt for a failed one).
	if _, err := clear(dir, k.fileName()); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	w := &Writer{path: path, f: f, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.flusher()
	return w, nil
}

// create creates a live file that must not exist, following no symbolic
// link.
func create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
}

// Clear removes every live file of the session directory dir and returns
// how many it removed. An absent directory holds none.
func Clear(dir string) (int, error) { return clear(dir, "") }

// clear removes the live files of dir but keep.
func clear(dir, keep string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("livetext: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !IsLiveFile(e.Name()) || e.Name() == keep {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("livetext: %w", err)
	}
	return n, nil
}

// Path is the live file's path.
func (w *Writer) Path() string {
	if w == nil {
		return ""
	}
	return w.path
}

// Chunk appends a chunk of kind (wire.LiveKindText or
// wire.LiveKindReasoning) to the live file. Empty text and other kinds are
// ignored.
func (w *Writer) Chunk(kind, text string) {
	if w == nil || text == "" {
		return
	}
	i, ok := kindIndex(kind)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	off := w.offsets[i]
	w.offsets[i] += int64(len(text))
	if len(w.buf) >= MaxBuffered {
		w.dropped++
		w.mu.Unlock()
		return
	}
	w.buf = appendChunk(w.buf, kind, off, text)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many chunks were dropped because the flusher fell
// MaxBuffered behind.
func (w *Writer) Dropped() int64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// flusher writes what Chunk buffered until End stops it; it writes what is
// left then.
func (w *Writer) flusher() {
	defer close(w.done)
	var spare []byte
	for {
		stopping := false
		select {
		case <-w.wake:
		case <-w.stop:
			stopping = true
		}
		w.mu.Lock()
		b := w.buf
		w.buf = spare[:0]
		w.mu.Unlock()
		if len(b) > 0 && w.werr == nil {
			if _, err := w.f.Write(b); err != nil {
				w.werr = err
			}
		}
		spare = b
		if stopping {
			return
		}
	}
}

// End ends the live file: it writes the end marker (stored: the call's
// message is stored; otherwise the attempt stored nothing and what it
// showed is void), waits for the flusher, and removes the file. It
// returns the first error met writing or removing the file; the caller
// only reports it. Calls after the first do nothing.
func (w *Writer) End(stored bool) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return nil
	}
	w.ended = true
	end := endAbandoned
	if stored {
		end = endStored
	}
	w.buf = append(w.buf, `{"end":"`+end+`"}`+"\n"...)
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	err := w.werr
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(w.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("livetext: %s: %w", w.path, err)
	}
	return nil
}
