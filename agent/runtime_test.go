package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// TestCallModelDecodesWithoutTheWriteLock: while CallModel decodes the
// conversation, the session's other operations go on: an append through
// the same handle lands, and the call then stores its message after it,
// having sent the conversation it read.
func TestCallModelDecodesWithoutTheWriteLock(t *testing.T) {
	f := newFixture(t, nil, answer("hi"))
	decoding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	agent.OnDecode(f.acts, func() {
		once.Do(func() { close(decoding) })
		<-release
	})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)

	type outcome struct {
		res agent.ModelResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := f.acts.CallModel(bg, f.modelInput(1, 1))
		done <- outcome{res, err}
	}()
	ctx := testdeadline.Context(t, time.Minute)
	select {
	case <-decoding:
	case <-ctx.Done():
		t.Fatal("CallModel never decoded its conversation")
	}
	// The decode is blocked: an append through the handle must not wait
	// for it.
	require.NoError(t, f.hd.Append(ctx, []session.Event{ev(t, wire.TypeTodoWrite, 3, `{"todos":[]}`)}),
		"an append waited for the conversation's decode")
	unblock()

	var got outcome
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("CallModel did not return")
	}
	require.NoError(t, got.err)
	require.Equal(t, int64(10), got.res.MessageSeq, "stored after the append: the route at 4, five chunks, the message")
	log := f.log()
	require.Equal(t, wire.TypeTodoWrite, log[3].Type)
	require.Equal(t, wire.TypeAssistantMessage, log[10].Type)
	require.Len(t, f.prov.requests, 1)
	require.Len(t, f.prov.requests[0].Messages, 1, "the conversation read before the append: the user's message")
}

// TestCallModelStoresOnlyIntoTheLogItRead: a log whose events changed
// under the call (rewritten on disk while the call decoded) does not get
// the message; the call fails with a retryable error, and its retry,
// reading the log again, stores it.
func TestCallModelStoresOnlyIntoTheLogItRead(t *testing.T) {
	f := newFixture(t, nil, answer("hi"), answer("hi again"))
	paths, err := filepath.Glob(filepath.Join(f.root, "*", f.hd.ID(), "session*.jsonl"))
	require.NoError(t, err)
	require.Len(t, paths, 1)
	var once sync.Once
	agent.OnDecode(f.acts, func() {
		once.Do(func() {
			// Another writer rewrites the user's message, same length, as
			// a new file.
			b, err := os.ReadFile(paths[0])
			require.NoError(t, err)
			require.Contains(t, string(b), `"text":"hello"`)
			tmp := paths[0] + ".tmp"
			require.NoError(t, os.WriteFile(tmp, []byte(strings.Replace(string(b), `"text":"hello"`, `"text":"HELLO"`, 1)), 0o600))
			require.NoError(t, os.Rename(tmp, paths[0]))
		})
	})
	_, err = f.acts.CallModel(bg, f.modelInput(1, 1))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "IOError", app.Type())
	require.False(t, app.NonRetryable())
	require.Equal(t, []string{"turn/start", "user/message", "step/start"}, types(f.log()), "nothing stored")

	res, err := f.acts.CallModel(bg, f.modelInput(1, 1))
	require.NoError(t, err)
	require.False(t, res.Reused)
	require.Equal(t, "HELLO", f.prov.requests[1].Messages[0].Content[0].Text)
}

// TestConversationCacheIsPerActivities: two agent activities values, two
// workers of one process even over one runtime, each decode into their own
// cache.
func TestConversationCacheIsPerActivities(t *testing.T) {
	f := newFixture(t, nil, answer("one"), answer("two"))
	other := &agent.Activities{Runtime: f.acts.Runtime, Providers: f.acts.Providers, System: f.acts.System}
	decodes := map[*agent.Activities]int{}
	for _, a := range []*agent.Activities{f.acts, other} {
		agent.OnDecode(a, func() { decodes[a]++ })
	}
	_, err := f.acts.CallModel(bg, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, 1, agent.CachedSessions(f.acts))
	require.Equal(t, 0, agent.CachedSessions(other), "the other worker's cache holds the first one's session")

	f.append(ev(t, wire.TypeStepStart, 10, `{"turn":1,"step":2}`))
	_, err = other.CallModel(bg, f.modelInput(1, 2))
	require.NoError(t, err)
	require.Equal(t, 1, agent.CachedSessions(other))
	require.Equal(t, map[*agent.Activities]int{f.acts: 1, other: 1}, decodes)
}
