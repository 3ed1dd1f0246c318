package client

import (
	"context"
	"strings"
	"sync"

	"github.com/sessionflow/sessionflow/wire"
)

// liveText is what WatchTurn knows of the live text (WatchOptions.Live):
// the text of the call followed last, as a heartbeat detail would carry it
// (wire.ModelProgress) but whole and current. A follower goroutine updates
// it and wakes the watch.
type liveText struct {
	wake chan struct{}

	mu sync.Mutex
	// ok is set once a call was followed, and cleared when the follow
	// failed (the heartbeat details take over).
	ok        bool
	turn      int64
	step      int64
	attempt   int32
	base      int64 // offset of text in the call's text (past a gap)
	text      strings.Builder
	reasoning bool
	chunks    int64
}

func newLiveText() *liveText { return &liveText{wake: make(chan struct{}, 1)} }

// follow applies the events of src's follow of session id until ctx is
// done or the follow fails.
func (l *liveText) follow(ctx context.Context, src LiveSource, id string) {
	for e, err := range src.FollowLive(ctx, id) {
		if err != nil {
			l.mu.Lock()
			l.ok = false
			l.mu.Unlock()
			return
		}
		l.apply(e)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// apply folds one live event into the text.
func (l *liveText) apply(e wire.LiveEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ok || e.Turn != l.turn || e.Step != l.step || e.Attempt != l.attempt {
		l.ok, l.turn, l.step, l.attempt = true, e.Turn, e.Step, e.Attempt
		l.base, l.reasoning, l.chunks = 0, false, 0
		l.text.Reset()
	}
	switch e.Event {
	case wire.LiveReset:
		// What the attempt showed is void; a newer one starts over.
		l.base, l.reasoning = 0, false
		l.text.Reset()
	case wire.LiveChunk:
		l.chunks++
		if e.Kind == wire.LiveKindReasoning {
			l.reasoning = l.text.Len() == 0 && l.base == 0
			return
		}
		if e.Kind != wire.LiveKindText {
			return
		}
		end := l.base + int64(l.text.Len())
		switch {
		case e.Offset > end:
			// A gap (chunks the writer dropped): the text restarts there.
			l.base = e.Offset
			l.text.Reset()
			l.text.WriteString(e.Text)
		case e.Offset+int64(len(e.Text)) > end:
			l.text.WriteString(e.Text[end-e.Offset:])
		}
		l.reasoning = false
	}
}

// progress is the live text as a heartbeat detail; ok is false before any
// call was followed, and after the follow failed.
func (l *liveText) progress() (wire.ModelProgress, bool) {
	if l == nil {
		return wire.ModelProgress{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ok {
		return wire.ModelProgress{}, false
	}
	return wire.ModelProgress{Turn: l.turn, Step: l.step, Attempt: l.attempt, Chunks: l.chunks,
		TextOffset: l.base, Text: l.text.String(), Reasoning: l.reasoning}, true
}
