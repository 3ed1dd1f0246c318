package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// The routes the server registers and the paths of the OpenAPI document
// are the same, both ways.
func TestRoutesAndDocumentAgree(t *testing.T) {
	s, err := httpapi.New(httpapi.Options{Store: newStore(t, jsonl.CompressionNone, nil)})
	require.NoError(t, err)
	doc := loadOpenAPI(t)
	var documented []string
	for path, ops := range doc.raw["paths"].(map[string]any) {
		for method := range ops.(map[string]any) {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	registered := s.Routes()
	sort.Strings(documented)
	sort.Strings(registered)
	require.Equal(t, documented, registered, "the routes registered and the operations of httpapi/openapi.yaml differ")
	require.Contains(t, registered, "GET /v1/sessions/{id}/events")
}

// The document is served as it is embedded, and responses of every kind
// validate against it (api.do checks each one).
func TestOpenAPIServed(t *testing.T) {
	a := newAPI(t, httpapi.Options{Store: newStore(t, jsonl.CompressionNone, nil)})
	code, body := a.do("GET", "/v1/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, httpapi.OpenAPI, body)
	require.True(t, bytes.HasPrefix(body, []byte("openapi: 3.1.0\n")))
}

// The list shows each stored session with what its log says (turns, last
// seq, last time) and its state from Temporal; one session shows its
// loop's state when live.
func TestListAndGetSessions(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	s1 := append(turns(t, 2),
		sessiontest.TurnStart(t, 10, 3),
		sessiontest.Ev(t, wire.TypeRequestContext, 11, map[string]any{"provider": "scripted", "model": "m1"}),
		sessiontest.Ev(t, wire.TypeRequestContext, 12, map[string]any{"provider": "anthropic", "model": "claude"}),
		sessiontest.Ev(t, wire.TypeStepStart, 13, map[string]any{"turn": 3, "step": 1}),
		sessiontest.TurnEnd(t, 14, 3))
	writeSession(t, st, "s1", "/work/p1", s1, 5)
	writeSession(t, st, "s2", "", turns(t, 1), 5)
	fc := &fakeControl{
		listed: []client.ListedSession{{SessionID: "s1", WorkflowID: "session/s1", RunID: "run-1", Phase: wire.PhaseLive}},
		phase:  wire.PhaseLive,
		loop:   wire.LoopState{State: wire.LoopRunning, Turn: 4, Step: 1, Recent: []wire.TurnInfo{{Turn: 4, StartSeq: 15, Steps: 1}}},
	}
	a := newAPI(t, httpapi.Options{Store: st, Control: fc})

	code, body := a.do("GET", "/v1/sessions", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var list httpapi.SessionList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Sessions, 2)
	byID := map[string]httpapi.Session{}
	for _, s := range list.Sessions {
		byID[s.ID] = s
	}
	require.Equal(t, httpapi.Session{ID: "s1", State: "live", Phase: "live", Cwd: "/work/p1", Provider: "anthropic", Model: "claude", CreatedAt: 500, Turns: 3, LastSeq: 14,
		UpdatedAt: 1014, WorkflowID: "session/s1", RunID: "run-1"}, byID["s1"])
	require.Equal(t, httpapi.Session{ID: "s2", State: "stored", CreatedAt: 500, Turns: 1, LastSeq: 4,
		UpdatedAt: 1004, WorkflowID: "session/s2"}, byID["s2"])

	// Paging.
	code, body = a.do("GET", "/v1/sessions?limit=1", nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Sessions, 1)
	require.NotEmpty(t, list.NextCursor)
	first := list.Sessions[0].ID
	code, body = a.do("GET", "/v1/sessions?limit=1&cursor="+list.NextCursor, nil)
	require.Equal(t, http.StatusOK, code)
	list = httpapi.SessionList{}
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Sessions, 1)
	require.NotEqual(t, first, list.Sessions[0].ID)
	require.Empty(t, list.NextCursor)
	code, body = a.do("GET", "/v1/sessions?limit=0", nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "InvalidArgument", errorOf(t, body).Type)
	code, body = a.do("GET", "/v1/sessions?cursor=nope", nil)
	require.Equal(t, http.StatusBadRequest, code, "%s", body)

	// One live session: its loop.
	code, body = a.do("GET", "/v1/sessions/s1", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var one httpapi.Session
	require.NoError(t, json.Unmarshal(body, &one))
	require.Equal(t, "live", one.State)
	require.NotNil(t, one.Loop)
	require.Equal(t, int64(4), one.Loop.Turn)

	// A session whose workflow is not running is stored, without loop.
	fc.descErr = &client.Error{Type: client.TypeNotRunning, Message: "not running"}
	code, body = a.do("GET", "/v1/sessions/s2", nil)
	require.Equal(t, http.StatusOK, code)
	one = httpapi.Session{}
	require.NoError(t, json.Unmarshal(body, &one))
	require.Equal(t, "stored", one.State)
	require.Nil(t, one.Loop)

	// Temporal unreachable: the store still answers, the state is unknown.
	fc.listErr = errors.New("connection refused")
	code, body = a.do("GET", "/v1/sessions", nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &list))
	for _, s := range list.Sessions {
		require.Equal(t, "unknown", s.State)
		require.Equal(t, "connection refused", s.StateError)
	}

	// No such session: 404, typed, and Temporal is not asked.
	before := len(fc.Calls())
	code, body = a.do("GET", "/v1/sessions/nope", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, httpapi.ErrorInfo{Type: "NoSuchSession", Message: `no session "nope" in the store`}, errorOf(t, body))
	require.Len(t, fc.Calls(), before)
}

// The events route serves the stored events as JSON lines exactly as the
// log holds them: on a raw root, the log's own lines; on a zstd root
// whose log is many frames, every frame's lines (decompressed by an
// independent decoder), not the first frame's only. after=SEQ serves the
// events after SEQ; reads go on past one batch.
func TestEventsAsJSONLines(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			st := newStore(t, comp, nil)
			writeSession(t, st, "s1", "/p", turns(t, 3), 3) // 5 frames of events
			snap, err := st.Stat(context.Background(), "s1")
			require.NoError(t, err)
			raw, err := os.ReadFile(snap.Path)
			require.NoError(t, err)
			if comp == jsonl.CompressionZstd {
				dec, err := zstd.NewReader(nil)
				require.NoError(t, err)
				raw, err = dec.DecodeAll(raw, nil)
				require.NoError(t, err)
			}
			logLines := strings.SplitAfter(string(raw), "\n")
			logLines = logLines[1 : len(logLines)-1] // the header; the empty tail
			require.Len(t, logLines, 15)

			a := newAPI(t, httpapi.Options{Store: st, ReadBatch: 4})
			code, body := a.do("GET", "/v1/sessions/s1/events", nil)
			require.Equal(t, http.StatusOK, code, "%s", body)
			require.Equal(t, strings.Join(logLines, ""), string(body))
			require.Contains(t, string(body), `answer <1> & \"more\"`, "HTML characters kept as the log has them")

			code, body = a.do("GET", "/v1/sessions/s1/events?after=9", nil)
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, strings.Join(logLines[10:], ""), string(body))
			code, body = a.do("GET", "/v1/sessions/s1/events?after=14", nil)
			require.Equal(t, http.StatusOK, code)
			require.Empty(t, body)

			code, body = a.do("GET", "/v1/sessions/s1/events?after=x", nil)
			require.Equal(t, http.StatusBadRequest, code)
			require.Equal(t, "InvalidArgument", errorOf(t, body).Type)
			code, body = a.do("GET", "/v1/sessions/s9/events", nil)
			require.Equal(t, http.StatusNotFound, code)
			require.Equal(t, "NoSuchSession", errorOf(t, body).Type)
		})
	}
}

// sseEvent is one Server-Sent Event or comment read from a stream.
type sseEvent struct {
	id, event, data string
	comment         string
}

// sseReader reads a stream's events as they come.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	ch   chan sseEvent
}

func openStream(t *testing.T, a *api, path string, header ...string) (*sseReader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", a.http.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, b)
	}
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := &sseReader{t: t, resp: resp, ch: make(chan sseEvent, 1024)}
	go func() {
		defer close(r.ch)
		defer resp.Body.Close()
		var cur sseEvent
		buf := make([]byte, 0, 1<<16)
		var line []byte
		for {
			n, err := resp.Body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				line, buf = append(line[:0], buf[:i]...), buf[i+1:]
				s := string(line)
				switch {
				case s == "":
					if cur != (sseEvent{}) {
						r.ch <- cur
					}
					cur = sseEvent{}
				case strings.HasPrefix(s, ":"):
					r.ch <- sseEvent{comment: strings.TrimSpace(s[1:])}
				case strings.HasPrefix(s, "id: "):
					cur.id = s[4:]
				case strings.HasPrefix(s, "event: "):
					cur.event = s[7:]
				case strings.HasPrefix(s, "data: "):
					cur.data = s[6:]
				}
			}
			buf = append(buf[:0:cap(buf)], buf...)
			if err != nil {
				return
			}
		}
	}()
	return r, cancel
}

// next returns the next event, skipping comments unless wantComment.
func (r *sseReader) next(wantComment bool) (sseEvent, bool) {
	r.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-r.ch:
			if !ok {
				return sseEvent{}, false
			}
			if e.comment != "" && !wantComment {
				continue
			}
			return e, true
		case <-timeout:
			r.t.Fatal("no event within 10s")
			return sseEvent{}, false
		}
	}
}

// A stream serves the stored events, then follows the log as it grows,
// sends keep-alives while nothing happens, and resumes after the
// Last-Event-ID it is given.
func TestEventsFollowTheLog(t *testing.T) {
	st := newStore(t, jsonl.CompressionZstd, nil)
	evs := turns(t, 3)
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{ID: "s1", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "w1"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, evs[:5]))
	a := newAPI(t, httpapi.Options{Store: st, KeepAlive: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond, ReadBatch: 2})

	r, cancel := openStream(t, a, "/v1/sessions/s1/events?after=1")
	defer cancel()
	for seq := 2; seq < 5; seq++ {
		e, ok := r.next(false)
		require.True(t, ok)
		require.Equal(t, sseEvent{id: itoa(seq), event: "event", data: string(mustJSON(t, evs[seq]))}, e)
	}
	// Nothing new: keep-alives.
	e, ok := r.next(true)
	require.True(t, ok)
	require.Equal(t, "keep-alive", e.comment)
	// The log grows: the stream follows.
	require.NoError(t, h.Append(ctx, evs[5:10]))
	for seq := 5; seq < 10; seq++ {
		e, ok := r.next(false)
		require.True(t, ok)
		require.Equal(t, itoa(seq), e.id)
		require.Equal(t, string(mustJSON(t, evs[seq])), e.data)
	}
	cancel()

	// Last-Event-ID resumes after it, and takes precedence over after.
	r2, cancel2 := openStream(t, a, "/v1/sessions/s1/events?follow=1&after=0", "Last-Event-ID", "7", "Accept", "*/*")
	defer cancel2()
	for seq := 8; seq < 10; seq++ {
		e, ok := r2.next(false)
		require.True(t, ok)
		require.Equal(t, itoa(seq), e.id)
	}
	require.NoError(t, h.Append(ctx, evs[10:]))
	for seq := 10; seq < 15; seq++ {
		e, ok := r2.next(false)
		require.True(t, ok)
		require.Equal(t, itoa(seq), e.id)
	}
	require.NoError(t, h.Close(ctx))
}

// The streams open at once are bounded: past the limit a stream is refused
// with 503 TooManyStreams; a client that goes frees its place, and Close
// ends every stream.
func TestStreamsAreBoundedAndEnd(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	a := newAPI(t, httpapi.Options{Store: st, MaxStreams: 1, PollInterval: 10 * time.Millisecond})

	r1, cancel1 := openStream(t, a, "/v1/sessions/s1/events")
	e, ok := r1.next(false)
	require.True(t, ok)
	require.Equal(t, "0", e.id)
	code, body := a.do("GET", "/v1/sessions/s1/events", nil, "Accept", "text/event-stream")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "TooManyStreams", errorOf(t, body).Type)

	// The client goes: its place is free again.
	cancel1()
	var resp *http.Response
	require.Eventually(t, func() bool {
		r, err := http.Get(a.http.URL + "/v1/sessions/s1/events?follow=1")
		if err != nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		resp = r
		return true
	}, 5*time.Second, 20*time.Millisecond, "the stream's place was not freed when its client went")
	defer resp.Body.Close()

	// Close ends the streams open.
	a.srv.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "the stream ended cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the open stream")
	}
}

// A stream whose session leaves the store ends with a typed error event.
func TestStreamEndsWhenTheSessionIsDeleted(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	a := newAPI(t, httpapi.Options{Store: st, PollInterval: 10 * time.Millisecond})
	r, cancel := openStream(t, a, "/v1/sessions/s1/events?after=4")
	defer cancel()
	require.NoError(t, st.Delete(context.Background(), "s1"))
	e, ok := r.next(false)
	require.True(t, ok)
	require.Equal(t, "error", e.event)
	require.Equal(t, `{"type":"NoSuchSession","message":"session \"s1\" is no longer in the store"}`, e.data)
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustJSON(t *testing.T, v json.Marshaler) []byte {
	b, err := v.MarshalJSON()
	require.NoError(t, err)
	return b
}

// Listen binds a bare port on loopback and refuses a non-loopback address
// without a token.
func TestListen(t *testing.T) {
	for addr, want := range map[string]string{"8080": "127.0.0.1:8080", ":8080": "127.0.0.1:8080", "localhost:9": "localhost:9", "[::1]:9": "[::1]:9"} {
		got, loopback, err := httpapi.ListenAddress(addr)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.True(t, loopback, addr)
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "example.com:80"} {
		_, loopback, err := httpapi.ListenAddress(addr)
		require.NoError(t, err)
		require.False(t, loopback, addr)
		_, err = httpapi.Listen(addr, "")
		require.ErrorIs(t, err, httpapi.ErrTokenRequired)
	}
	ln, err := httpapi.Listen("0.0.0.0:0", "secret")
	require.NoError(t, err)
	require.True(t, ln.Addr().(*net.TCPAddr).IP.IsUnspecified())
	ln.Close()
	ln, err = httpapi.Listen("0", "")
	require.NoError(t, err)
	require.True(t, ln.Addr().(*net.TCPAddr).IP.IsLoopback())
	ln.Close()
}

// Serve stops when its context ends, ending the streams open.
func TestServeStopsWithItsContext(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	s, err := httpapi.New(httpapi.Options{Store: st})
	require.NoError(t, err)
	ln, err := httpapi.Listen("127.0.0.1:0", "")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/sessions/s1/events?follow=1")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ended cleanly")
}
