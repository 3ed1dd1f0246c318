package httpapi_test

import (
	"context"
	"io"
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

// With the default options the server holds 1024 streams at once (100
// sessions streaming with a web view each take 200): the 1025th is refused
// with 503 TooManyStreams and a Retry-After, and a stream that ends frees
// its place.
func TestDefaultStreamLimit(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "/p", turns(t, 1), 5)
	a := newAPI(t, httpapi.Options{Store: st})
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	open := func() (*http.Response, error) {
		req, err := http.NewRequest("GET", a.http.URL+"/v1/sessions/s1/live", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		return hc.Do(req)
	}
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for i := range 1024 {
		resp, err := open()
		require.NoError(t, err)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("stream %d of 1024 refused: %d %s", i+1, resp.StatusCode, b)
		}
		held = append(held, resp)
	}

	// A refused stream's answer is short; an admitted one would not end.
	refused := func(path string) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", a.http.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err, "the stream past the limit was not refused")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", b)
		a.doc.check(t, "GET", path, resp, b)
		return resp, b
	}
	resp, body := refused("/v1/sessions/s1/live")
	require.Equal(t, httpapi.ErrorInfo{Type: "TooManyStreams", Message: "the server follows 1024 streams already, its limit; try again later"}, errorOf(t, body))
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	// The events stream shares the limit.
	_, body = refused("/v1/sessions/s1/events")
	require.Equal(t, "TooManyStreams", errorOf(t, body).Type)

	// A client goes: its place is free again.
	held[0].Body.Close()
	held = held[1:]
	require.Eventually(t, func() bool {
		r, err := open()
		if err != nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		held = append(held, r)
		return true
	}, 10*time.Second, 20*time.Millisecond, "the stream's place was not freed when its client went")
}
