package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/sessionflow/sessionflow/wire"
)

// LiveSource follows the live text of a session's running model call
// (package livetext; livetext.Source satisfies it).
type LiveSource interface {
	FollowLive(ctx context.Context, id string) iter.Seq2[wire.LiveEvent, error]
}

// LiveChunk is the data of an "event: chunk" of GET /v1/sessions/{id}/live:
// Text was streamed at byte Offset of the call's Kind text.
type LiveChunk struct {
	Turn    int64  `json:"turn"`
	Step    int64  `json:"step"`
	Attempt int32  `json:"attempt"`
	Offset  int64  `json:"offset"`
	Text    string `json:"text"`
	Kind    string `json:"kind"`
}

// LiveMark is the data of an "event: reset" (what was shown of the call is
// void: attempt Attempt streams it again from offset 0, or nothing is
// stored) and of an "event: end" (the call's message is stored: read it
// from /events).
type LiveMark struct {
	Turn    int64 `json:"turn"`
	Step    int64 `json:"step"`
	Attempt int32 `json:"attempt"`
}

// liveItem is one element of a followed live text.
type liveItem struct {
	e   wire.LiveEvent
	err error
}

// live is GET /v1/sessions/{id}/live: the running model call's text as
// Server-Sent Events (chunk, reset, end), following the session's live
// files until the client goes or the server closes.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	id, _, ok := s.stored(w, r)
	if !ok {
		return
	}
	release, ok := s.takeStream(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	items := make(chan liveItem, 64)
	go func() {
		defer close(items)
		for e, err := range s.opts.Live.FollowLive(ctx, id) {
			select {
			case items <- liveItem{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range items { // the follower has returned once items is closed
		}
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flush := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return bw.Flush() == nil && rc.Flush() == nil
	}
	fmt.Fprintf(bw, ": following the live text of session %q\n\n", id)
	if !flush() {
		return
	}
	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
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
		case it, ok := <-items:
			if !ok {
				return
			}
			if it.err != nil {
				if ctx.Err() == nil {
					s.streamError(bw, id, it.err)
					flush()
				}
				return
			}
			writeLive(bw, it.e)
			// Write what else is ready before flushing.
			for more := true; more; {
				select {
				case it, ok := <-items:
					switch {
					case !ok:
						flush()
						return
					case it.err != nil:
						s.streamError(bw, id, it.err)
						flush()
						return
					}
					writeLive(bw, it.e)
				default:
					more = false
				}
			}
			if !flush() {
				return
			}
		}
	}
}

// writeLive writes one live event.
func writeLive(bw *bufio.Writer, e wire.LiveEvent) {
	var data any = LiveMark{Turn: e.Turn, Step: e.Step, Attempt: e.Attempt}
	if e.Event == wire.LiveChunk {
		data = LiveChunk{Turn: e.Turn, Step: e.Step, Attempt: e.Attempt, Offset: e.Offset, Text: e.Text, Kind: e.Kind}
	}
	b, _ := marshal(data)
	fmt.Fprintf(bw, "event: %s\ndata: %s\n", e.Event, b)
}

// takeStream takes one of the server's stream places (Options.MaxStreams)
// and returns its release; when none is free it answers 503
// TooManyStreams with Retry-After and returns false.
func (s *Server) takeStream(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.streams <- struct{}{}:
		return func() { <-s.streams }, true
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, TypeTooManyStreams,
			fmt.Sprintf("the server follows %d streams already, its limit; try again later", s.opts.MaxStreams), nil)
		return nil, false
	}
}
