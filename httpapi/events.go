package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// writeTimeout bounds one write of a stream: a client that stops reading
// is dropped.
const writeTimeout = 30 * time.Second

// events is GET /v1/sessions/{id}/events[?after=SEQ][&follow=1]: the
// stored events with seq > SEQ as JSON lines, or, asked with Accept:
// text/event-stream or follow=1, as Server-Sent Events that keep following
// the log (Last-Event-ID resumes after that seq).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, fmt.Sprintf("follow must be a boolean, got %q", v), nil)
			return
		}
		sse = sse || f
	}
	after := int64(-1)
	for _, p := range []struct{ v, what string }{{q.Get("after"), "after"}, {r.Header.Get("Last-Event-ID"), "Last-Event-ID"}} {
		if p.v == "" {
			continue
		}
		n, err := strconv.ParseInt(p.v, 10, 64)
		if err != nil || n < -1 || n > wire.MaxSafeInteger {
			writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, fmt.Sprintf("%s must be a seq (an integer from -1), got %q", p.what, p.v), nil)
			return
		}
		after = n
	}
	id, snap, ok := s.stored(w, r)
	if !ok {
		return
	}
	if !sse {
		ctx := r.Context()
		h, err := s.opts.Store.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
		if err != nil {
			s.storeError(w, err)
			return
		}
		defer h.Close(context.WithoutCancel(ctx))
		s.lines(w, r, h, after+1)
		return
	}
	release, ok := s.takeStream(w)
	if !ok {
		return
	}
	defer release()
	s.follow(w, r, id, after+1, snap.Revision)
}

// lines writes the stored events from seq from as JSON lines, a batch at a
// time.
func (s *Server) lines(w http.ResponseWriter, r *http.Request, h *jsonl.Handle, from int64) {
	ctx := r.Context()
	first, err := h.Read(ctx, from, int64(s.opts.ReadBatch))
	if err != nil {
		s.storeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	batch := first
	for len(batch) > 0 {
		for _, e := range batch {
			b, err := e.MarshalJSON()
			if err != nil {
				s.opts.Logger.Error("encode an event", "session", h.ID(), "seq", e.Seq, "error", err)
				return
			}
			bw.Write(b)
			bw.WriteByte('\n')
		}
		if len(batch) < s.opts.ReadBatch {
			break
		}
		from = batch[len(batch)-1].Seq + 1
		if batch, err = h.Read(ctx, from, int64(s.opts.ReadBatch)); err != nil {
			// The status is sent: the body ends short.
			s.opts.Logger.Warn("read a session's events", "session", h.ID(), "from", from, "error", err)
			break
		}
	}
	_ = bw.Flush()
}

// follow streams the events from seq from as Server-Sent Events and keeps
// following the log until the client goes, the server closes or the
// session is no longer in the store. revision is the log's revision seen
// before h was opened: the log is read again whenever its revision
// differs from the last one seen.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, id string, from int64, revision string) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flush := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return bw.Flush() == nil && rc.Flush() == nil
	}
	fmt.Fprintf(bw, ": following session %q from seq %d\nretry: 1000\n\n", id, from)
	if !flush() {
		return
	}
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		// Read what is new, a batch at a time, through a handle held only
		// while reading: between changes the stream holds no events.
		next, err := s.send(ctx, bw, flush, id, from)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errWriteFailed) {
				s.streamError(bw, id, err)
				flush()
			}
			return
		}
		from = next
		// Wait until the log changes.
		for changed := false; !changed; {
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-keep.C:
				bw.WriteString(": keep-alive\n\n")
				if !flush() {
					return
				}
			case <-poll.C:
				snap, err := s.opts.Store.Stat(ctx, id)
				if err != nil || snap == nil {
					if ctx.Err() != nil {
						return
					}
					if err == nil {
						err = &wire.StoreError{Code: wire.CodeNotFound, SessionID: id}
					}
					s.streamError(bw, id, err)
					flush()
					return
				}
				if snap.Revision != revision {
					revision, changed = snap.Revision, true
				}
			}
		}
	}
}

// errWriteFailed ends a stream whose client does not take what is written.
var errWriteFailed = errors.New("the stream's client does not read")

// send writes the events of the log from seq from as Server-Sent Events, a
// batch at a time, through a read handle it closes, and returns the seq
// after the last one sent.
func (s *Server) send(ctx context.Context, bw *bufio.Writer, flush func() bool, id string, from int64) (int64, error) {
	h, err := s.opts.Store.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return from, err
	}
	defer h.Close(context.WithoutCancel(ctx))
	for {
		batch, err := h.Read(ctx, from, int64(s.opts.ReadBatch))
		if err != nil {
			return from, err
		}
		for _, e := range batch {
			b, err := e.MarshalJSON()
			if err != nil {
				return from, fmt.Errorf("encode event %d: %w", e.Seq, err)
			}
			fmt.Fprintf(bw, "id: %d\nevent: event\ndata: %s\n\n", e.Seq, b)
		}
		if len(batch) > 0 {
			from = batch[len(batch)-1].Seq + 1
			if !flush() {
				return from, errWriteFailed
			}
		}
		if len(batch) < s.opts.ReadBatch {
			return from, nil
		}
	}
}

// streamError writes the error that ends a stream as an "error" event.
func (s *Server) streamError(bw *bufio.Writer, id string, err error) {
	info := ErrorInfo{Type: errorType(err), Message: err.Error()}
	if wire.Code(info.Type) == wire.CodeNotFound {
		info = ErrorInfo{Type: TypeNoSuchSession, Message: fmt.Sprintf("session %q is no longer in the store", id)}
	}
	b, _ := marshal(info)
	fmt.Fprintf(bw, "event: error\ndata: %s\n", strings.TrimSuffix(string(b), "\n"))
	bw.WriteString("\n")
}
