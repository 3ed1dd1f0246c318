package agent_test

import (
	"bytes"
	"context"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// gatedProvider streams its chunks one by one, each after a receive on
// gate, then ends with fail or a stop.
type gatedProvider struct {
	chunks []provider.Chunk
	gate   chan struct{}
	fail   error
}

func (p *gatedProvider) Stream(ctx context.Context, _ provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		for _, c := range p.chunks {
			select {
			case <-p.gate:
			case <-ctx.Done():
				yield(provider.Chunk{}, ctx.Err())
				return
			}
			if !yield(c, nil) {
				return
			}
		}
		if p.fail != nil {
			select {
			case <-p.gate:
			case <-ctx.Done():
			}
			yield(provider.Chunk{}, p.fail)
			return
		}
		yield(finish(provider.FinishStop), nil)
	}
}

// followLive follows the fixture session's live text.
func followLive(t *testing.T, f *fixture) <-chan wire.LiveEvent {
	t.Helper()
	return followLiveThen(t, f, nil)
}

// followLiveThen follows the fixture session's live text, calling then
// (when set) on each event before it passes it on.
func followLiveThen(t *testing.T, f *fixture, then func(wire.LiveEvent)) <-chan wire.LiveEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	out := make(chan wire.LiveEvent, 64)
	done := make(chan struct{})
	src := livetext.Source{Store: f.newStore(), Options: livetext.Options{Poll: time.Hour}}
	go func() {
		defer close(done)
		for e, err := range src.FollowLive(ctx, f.hd.ID()) {
			if err != nil {
				return
			}
			if then != nil {
				then(e)
			}
			out <- e
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func nextLive(t *testing.T, ch <-chan wire.LiveEvent) wire.LiveEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no live event")
	}
	return wire.LiveEvent{}
}

// liveNames lists the live files of the fixture's session.
func liveNames(t *testing.T, f *fixture) []string {
	t.Helper()
	dir, err := f.store.SessionDir(bg, f.hd.ID())
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if livetext.IsLiveFile(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// slowStoreFS delays each write of an assistant/message to the log, so
// that an end marker written before the message is stored would be seen
// first.
type slowStoreFS struct{ jsonl.OSFS }

type slowStoreFile struct{ jsonl.File }

func (fs slowStoreFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	f, err := fs.OSFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".jsonl") {
		return f, err
	}
	return slowStoreFile{f}, nil
}

func (f slowStoreFile) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"assistant/message"`)) {
		time.Sleep(300 * time.Millisecond)
	}
	return f.File.Write(b)
}

// TestCallModelStreamsLiveTextBeforeTheMessageIsStored: each text and
// reasoning chunk reaches a follower while the call still streams (the log
// has no message yet); the end comes once the message is stored, and the
// live file is gone then.
func TestCallModelStreamsLiveTextBeforeTheMessageIsStored(t *testing.T) {
	f := newFixture(t, nil)
	p := &gatedProvider{chunks: []provider.Chunk{reasoning("hmm"), text("Hel"), callChunk(0, "c1", "echo", "{}"), text("lo")}, gate: make(chan struct{})}
	f.acts.Providers["fake"] = p
	slow, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone, FS: slowStoreFS{}})
	require.NoError(t, err)
	f.acts = f.actsOn(slow)
	// At the end marker, the message is in the log already: read at once.
	var lastAtEnd atomic.Value
	live := followLiveThen(t, f, func(e wire.LiveEvent) {
		if e.Event == "end" {
			evs, err := f.newStore().ReadEvents(bg, f.hd.ID(), 0, -1)
			if err == nil && len(evs) > 0 {
				lastAtEnd.Store(evs[len(evs)-1].Type)
			}
		}
	})
	res := make(chan error, 1)
	go func() { _, err := f.callModel(f.acts, f.modelInput(1, 1)); res <- err }()

	p.gate <- struct{}{}
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Offset: 0, Text: "hmm", Kind: "reasoning"}, nextLive(t, live))
	p.gate <- struct{}{}
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Offset: 0, Text: "Hel", Kind: "text"}, nextLive(t, live))
	require.Len(t, f.log(), 3, "the text is live before the message is stored")
	require.Equal(t, []string{"live.1.1.1"}, liveNames(t, f))
	p.gate <- struct{}{} // the tool call's chunk: not live text
	p.gate <- struct{}{}
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Offset: 3, Text: "lo", Kind: "text"}, nextLive(t, live))
	require.Equal(t, wire.LiveEvent{Event: "end", Turn: 1, Step: 1, Attempt: 1}, nextLive(t, live))
	require.Equal(t, "assistant/message", lastAtEnd.Load(), "the end comes once the message is stored")
	require.NoError(t, <-res)
	require.Empty(t, liveNames(t, f), "the live file is removed once the message is stored")
}

// TestCallModelAFailedAttemptResetsItsLiveText: an attempt that fails
// stores nothing, and what it showed is reset; its file is gone.
func TestCallModelAFailedAttemptResetsItsLiveText(t *testing.T) {
	f := newFixture(t, nil)
	p := &gatedProvider{chunks: []provider.Chunk{text("doomed")}, gate: make(chan struct{}),
		fail: &provider.Error{Retryable: true, Status: 503, Message: "overloaded"}}
	f.acts.Providers["fake"] = p
	live := followLive(t, f)
	res := make(chan error, 1)
	go func() { _, err := f.callModel(f.acts, f.modelInput(1, 1)); res <- err }()
	p.gate <- struct{}{}
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Text: "doomed", Kind: "text"}, nextLive(t, live))
	p.gate <- struct{}{} // the failure
	require.Error(t, <-res)
	require.Equal(t, wire.LiveEvent{Event: "reset", Turn: 1, Step: 1, Attempt: 1}, nextLive(t, live))
	require.Empty(t, liveNames(t, f))
	require.Len(t, f.log(), 3)
}

// TestCallModelACancelledCallEndsItsLiveTextWithTheAnchor: the anchor of
// a cancelled call is stored: its live text ends, it is not reset.
func TestCallModelACancelledCallEndsItsLiveTextWithTheAnchor(t *testing.T) {
	f := newFixture(t, nil, response{chunks: []provider.Chunk{text("Hello "), text("wor")}, stall: true})
	// The call is cancelled once a viewer has seen both chunks: a call
	// that ends before the follower opens its file shows nothing live.
	shown := make(chan struct{})
	live := followLiveThen(t, f, func(e wire.LiveEvent) {
		if e.Event == "chunk" && e.Offset == 6 {
			close(shown)
		}
	})
	ctx, cancel := context.WithCancelCause(bg)
	defer cancel(nil)
	go func() {
		<-shown
		cancel(temporal.NewCanceledError())
	}()
	_, err := f.env(f.acts, withContext(ctx)).ExecuteActivity(wire.CallModelActivity, f.modelInput(1, 1))
	require.Error(t, err)
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Text: "Hello ", Kind: "text"}, nextLive(t, live))
	require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Offset: 6, Text: "wor", Kind: "text"}, nextLive(t, live))
	require.Equal(t, wire.LiveEvent{Event: "end", Turn: 1, Step: 1, Attempt: 1}, nextLive(t, live))
	require.Empty(t, liveNames(t, f))
}

// TestEndTurnRemovesAStaleLiveFile: the live file of a worker killed
// mid-call is removed by the turn's end.
func TestEndTurnRemovesAStaleLiveFile(t *testing.T) {
	f := newFixture(t, nil)
	dir, err := f.store.SessionDir(bg, f.hd.ID())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "live.1.1.1"), []byte(`{"live":1,"turn":1,"step":1,"attempt":1}`+"\n"+`{"kind":"text","offset":0,"text":"dead"}`+"\n"), 0o600))
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "aborted"}})
	require.NoError(t, err)
	require.Empty(t, liveNames(t, f))
}

// TestCallModelWithoutLiveText: NoLiveText writes no file.
func TestCallModelWithoutLiveText(t *testing.T) {
	f := newFixture(t, nil)
	p := &gatedProvider{chunks: []provider.Chunk{text("quiet")}, gate: make(chan struct{})}
	f.acts.Providers["fake"] = p
	f.acts.NoLiveText = true
	res := make(chan error, 1)
	go func() { _, err := f.callModel(f.acts, f.modelInput(1, 1)); res <- err }()
	p.gate <- struct{}{}
	require.Empty(t, liveNames(t, f))
	require.NoError(t, <-res)
}

// TestCallModelReusingAStoredMessageRemovesTheStaleLiveFile: an attempt
// that finds the step's message stored (its earlier attempt died after the
// store, before it removed its live file) removes that file.
func TestCallModelReusingAStoredMessageRemovesTheStaleLiveFile(t *testing.T) {
	f := newFixture(t, nil, answer("done"))
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	dir, err := f.store.SessionDir(bg, f.hd.ID())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "live.1.1.1"), []byte(`{"live":1,"turn":1,"step":1,"attempt":1}`+"\n"+`{"kind":"text","offset":0,"text":"done"}`+"\n"), 0o600))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.True(t, res.Reused)
	require.Empty(t, liveNames(t, f))
}
