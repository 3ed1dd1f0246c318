package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
)

// The live route streams the running model call's text from the store's
// live files: chunks with their offsets, a reset when a retried attempt
// replaces what was shown, and the end once the message is stored.
func TestLiveTextStreams(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "/p", turns(t, 1), 5)
	a := newAPI(t, httpapi.Options{Store: st, KeepAlive: 50 * time.Millisecond})
	dir, err := st.SessionDir(context.Background(), "s1")
	require.NoError(t, err)

	r, cancel := openStream(t, a, "/v1/sessions/s1/live")
	defer cancel()
	e, ok := r.next(true)
	require.True(t, ok)
	require.Equal(t, `following the live text of session "s1"`, e.comment)

	w1, err := livetext.Start(dir, 2, 1, 1)
	require.NoError(t, err)
	w1.Chunk("reasoning", "Thinking.")
	w1.Chunk("text", "Hel")
	w1.Chunk("text", "lo <b>")
	var got []sseEvent
	for len(got) < 3 {
		e, ok := r.next(false)
		require.True(t, ok)
		got = append(got, e)
	}
	require.Equal(t, []sseEvent{
		{event: "chunk", data: `{"turn":2,"step":1,"attempt":1,"offset":0,"text":"Thinking.","kind":"reasoning"}`},
		{event: "chunk", data: `{"turn":2,"step":1,"attempt":1,"offset":0,"text":"Hel","kind":"text"}`},
		{event: "chunk", data: `{"turn":2,"step":1,"attempt":1,"offset":3,"text":"lo <b>","kind":"text"}`},
	}, got)

	// A retried attempt replaces what was shown.
	w2, err := livetext.Start(dir, 2, 1, 2)
	require.NoError(t, err)
	w2.Chunk("text", "Hi")
	e, ok = r.next(false)
	require.True(t, ok)
	require.Equal(t, sseEvent{event: "reset", data: `{"turn":2,"step":1,"attempt":2}`}, e)
	e, ok = r.next(false)
	require.True(t, ok)
	require.Equal(t, sseEvent{event: "chunk", data: `{"turn":2,"step":1,"attempt":2,"offset":0,"text":"Hi","kind":"text"}`}, e)
	require.NoError(t, w2.End(true))
	e, ok = r.next(false)
	require.True(t, ok)
	require.Equal(t, sseEvent{event: "end", data: `{"turn":2,"step":1,"attempt":2}`}, e)
	e, ok = r.next(true)
	require.True(t, ok)
	require.Equal(t, "keep-alive", e.comment)
	_ = w1

	code, body := a.do("GET", "/v1/sessions/nope/live", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NoSuchSession", errorOf(t, body).Type)
}
