package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// The control routes pass their requests to the matching update, and
// answer its result.
func TestControlRoutesCallTheUpdates(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	fc := &fakeControl{loop: wire.LoopState{Approvals: []wire.PendingApproval{{ID: "ap-1", CallID: "c1", Tool: "run_command", Turn: 2, Step: 1, Arguments: "{}", AskedAtMs: 5}}}}
	a := newAPI(t, httpapi.Options{Store: st, Control: fc})

	for mode, call := range map[string]string{"": "Followup s1", "followup": "Followup s1", "steer": "Steer s1", "inject": "Inject s1"} {
		code, body := a.do("POST", "/v1/sessions/s1/messages", map[string]any{"text": "hi <there>", "mode": mode, "messageId": "m-" + mode})
		require.Equal(t, http.StatusOK, code, "%s", body)
		require.JSONEq(t, `{"messageId":"msg-1","target":"next-turn","splicedSeq":-1,"turn":0}`, string(body))
		calls := fc.Calls()
		require.Equal(t, call, calls[len(calls)-1])
		in := fc.inputs[len(fc.inputs)-1]
		require.Equal(t, `"hi <there>"`, string(in.Content))
		require.Equal(t, "m-"+mode, in.MessageID)
	}
	code, body := a.do("POST", "/v1/sessions/s1/messages", map[string]any{"content": []any{map[string]any{"type": "text", "text": "blocks"}}, "wait": true})
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.JSONEq(t, `[{"type":"text","text":"blocks"}]`, string(fc.inputs[len(fc.inputs)-1].Content))
	require.True(t, fc.inputs[len(fc.inputs)-1].Wait)

	code, body = a.do("POST", "/v1/sessions/s1/cancel", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.JSONEq(t, `{"cancelled":true,"turn":2}`, string(body))
	code, _ = a.do("POST", "/v1/sessions/s1/cancel", map[string]any{"cause": "parent", "keepInbox": true})
	require.Equal(t, http.StatusOK, code)
	calls := fc.Calls()
	require.Equal(t, []string{"CancelTurn s1 user false", "CancelTurn s1 parent true"}, calls[len(calls)-2:])

	code, body = a.do("GET", "/v1/sessions/s1/approvals", nil)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"approvals":[{"id":"ap-1","callId":"c1","tool":"run_command","turn":2,"step":1,"arguments":"{}","askedAtMs":5}]}`, string(body))
	code, body = a.do("POST", "/v1/sessions/s1/approvals/ap-1", map[string]any{"outcome": "allowed-once", "remember": map[string]any{"tool": "run_command", "commandPrefix": "go test"}})
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.JSONEq(t, `{"id":"ap-1","callId":"c1","outcome":"allowed-once"}`, string(body))
	require.Equal(t, wire.DecideRequest{ID: "ap-1", Outcome: "allowed-once", Remember: &wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}}, fc.decided[0])

	code, body = a.do("POST", "/v1/sessions/s1/permissions", map[string]any{"approvalPolicy": "never"})
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.JSONEq(t, `{"sandboxMode":"workspace-write","approvalPolicy":"never"}`, string(body))
	code, body = a.do("POST", "/v1/sessions/s1/compact", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	code, body = a.do("POST", "/v1/sessions/s1/dispose", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.JSONEq(t, `{"nextSeq":10}`, string(body))
	calls = fc.Calls()
	require.Equal(t, []string{"SetPermissions s1", "Compact s1", "Dispose s1"}, calls[len(calls)-3:])
}

// Bad requests are refused, typed, before any update is sent.
func TestControlRefusesBadRequests(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	fc := &fakeControl{}
	a := newAPI(t, httpapi.Options{Store: st, Control: fc})
	for _, c := range []struct {
		path   string
		body   any
		status int
		typ    string
		msg    string
	}{
		{"/v1/sessions/s1/messages", map[string]any{}, 400, "InvalidArgument", "the message is empty: give text or content"},
		{"/v1/sessions/s1/messages", map[string]any{"text": "x", "mode": "shout"}, 400, "InvalidArgument", `mode must be "followup", "steer" or "inject", got "shout"`},
		{"/v1/sessions/s1/messages", map[string]any{"text": "x", "extra": 1}, 400, "InvalidArgument", `the request body: json: unknown field "extra"`},
		{"/v1/sessions/s1/cancel", map[string]any{"cause": "boredom"}, 400, "InvalidArgument", `cause must be "user" or "parent", got "boredom"`},
		{"/v1/sessions/nope/messages", map[string]any{"text": "x"}, 404, "NoSuchSession", `no session "nope" in the store`},
		{"/v1/sessions/nope/dispose", nil, 404, "NoSuchSession", `no session "nope" in the store`},
	} {
		code, body := a.do("POST", c.path, c.body)
		require.Equal(t, c.status, code, "%s %v: %s", c.path, c.body, body)
		require.Equal(t, httpapi.ErrorInfo{Type: c.typ, Message: c.msg}, errorOf(t, body), c.path)
	}
	require.Empty(t, fc.Calls(), "an update was sent for a refused request")

	// A body must be JSON.
	req, err := http.NewRequest("POST", a.http.URL+"/v1/sessions/s1/messages", strings.NewReader(`text=hi`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)

	// Unknown routes and methods are typed too.
	code, body := a.do("GET", "/v1/nothing", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NoSuchRoute", errorOf(t, body).Type)
	code, body = a.do("DELETE", "/v1/sessions/s1", nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
	require.Equal(t, "MethodNotAllowed", errorOf(t, body).Type)
}

// The workflows' refusals come back typed, with the status of their class
// and their details; a call Temporal does not answer is 503.
func TestControlErrorsAreTyped(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	fc := &fakeControl{}
	a := newAPI(t, httpapi.Options{Store: st, Control: fc})
	for _, c := range []struct {
		err     error
		status  int
		typ     string
		details map[string]any
	}{
		{&client.Error{Type: wire.ErrTypeTurnRunning, Message: `agent "s1" is running turn 2; append between turns`}, 409, "TurnRunning", nil},
		{&client.Error{Type: wire.ErrTypeApprovalSettled, Message: "settled", Outcome: "allowed-once"}, 409, "ApprovalSettled", map[string]any{"outcome": "allowed-once"}},
		{&client.Error{Type: wire.ErrTypeNoSuchApproval, Message: "no approval"}, 404, "NoSuchApproval", nil},
		{&client.Error{Type: wire.ErrTypeInboxFull, Message: "full"}, 429, "InboxFull", nil},
		{&client.Error{Type: client.TypeNotRunning, Message: "not running"}, 409, "WorkflowNotRunning", map[string]any{"sessionId": "s1"}},
		{&client.Error{Type: wire.ErrTypeInvalidArgument, Message: "bad outcome"}, 400, "InvalidArgument", nil},
		{&client.Error{Type: wire.ErrTypeNotLive, Message: "not live"}, 409, "SessionNotLive", nil},
		{errors.New("dial tcp: connection refused"), 503, "Unavailable", nil},
	} {
		fc.err = c.err
		code, body := a.do("POST", "/v1/sessions/s1/approvals/ap-1", map[string]any{"outcome": "allowed-once"})
		require.Equal(t, c.status, code, "%v: %s", c.err, body)
		got := errorOf(t, body)
		require.Equal(t, c.typ, got.Type)
		require.Equal(t, c.err.Error(), got.Message)
		require.Equal(t, c.details, got.Details)
	}

	// Without a Temporal connection the control routes are 503.
	b := newAPI(t, httpapi.Options{Store: st})
	code, body := b.do("POST", "/v1/sessions/s1/dispose", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "Unavailable", errorOf(t, body).Type)
}

// With a token, every request needs it; without one, only loopback host
// names are answered, and a cross-origin request is refused.
func TestBearerToken(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	writeSession(t, st, "s1", "", turns(t, 1), 5)
	a := newAPI(t, httpapi.Options{Store: st, Token: "s3cret"})
	code, _ := a.do("GET", "/v1/sessions", nil)
	require.Equal(t, http.StatusOK, code)
	for _, auth := range []string{"", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Basic czNjcmV0", "bearer s3cret"} {
		req, err := http.NewRequest("GET", a.http.URL+"/v1/sessions/s1/events", nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e httpapi.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%q", auth)
		require.Equal(t, "Unauthorized", e.Error.Type)
		require.Equal(t, `Bearer realm="sessionflow"`, resp.Header.Get("WWW-Authenticate"))
	}

	b := newAPI(t, httpapi.Options{Store: st})
	code, body := b.do("GET", "/v1/sessions", nil, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, `cross-origin request from "http://evil.example" refused`, errorOf(t, body).Message)
	req, err := http.NewRequest("GET", b.http.URL+"/v1/sessions", nil)
	require.NoError(t, err)
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// spyFS records every path the store reaches and every mutation.
type spyFS struct {
	jsonl.OSFS
	mu        sync.Mutex
	paths     []string
	mutations []string
}

func (s *spyFS) saw(path string, mutation bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths = append(s.paths, path)
	if mutation {
		s.mutations = append(s.mutations, path)
	}
}

func (s *spyFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	s.saw(name, flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0)
	return s.OSFS.OpenFile(name, flag, perm)
}
func (s *spyFS) Mkdir(name string, perm os.FileMode) error {
	s.saw(name, true)
	return s.OSFS.Mkdir(name, perm)
}
func (s *spyFS) Link(o, n string) error   { s.saw(n, true); return s.OSFS.Link(o, n) }
func (s *spyFS) Rename(o, n string) error { s.saw(n, true); return s.OSFS.Rename(o, n) }
func (s *spyFS) Remove(name string) error { s.saw(name, true); return s.OSFS.Remove(name) }
func (s *spyFS) Stat(name string) (os.FileInfo, error) {
	s.saw(name, false)
	return s.OSFS.Stat(name)
}
func (s *spyFS) Lstat(name string) (os.FileInfo, error) {
	s.saw(name, false)
	return s.OSFS.Lstat(name)
}
func (s *spyFS) ReadDir(name string) ([]os.DirEntry, error) {
	s.saw(name, false)
	return s.OSFS.ReadDir(name)
}

// No request path reaches the filesystem but through the store's id
// lookup: dot segments, encoded slashes, absolute paths, control
// characters and overlong ids are refused with a typed 400 or 404, the
// store reaches nothing outside its root and changes nothing.
func TestPathsNeverLeaveTheStore(t *testing.T) {
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	writeSession(t, st, "s1", "/p", turns(t, 1), 5)
	// A file beside the root that a traversal would reach.
	secret := filepath.Join(filepath.Dir(root), "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, []byte("secret\n"), 0o600))

	spy := &spyFS{}
	spied, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, FS: spy})
	require.NoError(t, err)
	fc := &fakeControl{}
	a := newAPI(t, httpapi.Options{Store: spied, Control: fc})
	long := strings.Repeat("x", 256)
	for _, c := range []struct {
		method, path string
		status       int
		typ          string
	}{
		{"GET", "/v1/sessions/../../secret.jsonl", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/s1/../../../secret.jsonl", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/%2e%2e/events", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/.%2E/%2e%2E/secret.jsonl", 400, "InvalidArgument"},
		{"GET", "/v1/sessions//events", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/s1%00/events", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/%0a/events", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/%ff/events", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/" + long + "/events", 400, "InvalidArgument"},
		{"POST", "/v1/sessions/" + long + "/dispose", 400, "InvalidArgument"},
		{"GET", "/v1/sessions/..%2F..%2Fsecret.jsonl/events", 404, "NoSuchSession"},
		{"GET", "/v1/sessions/%2F" + strings.ReplaceAll(strings.TrimPrefix(secret, "/"), "/", "%2F") + "/events", 404, "NoSuchSession"},
		{"GET", "/v1/sessions/..%5C..%5Csecret.jsonl", 404, "NoSuchSession"},
		{"POST", "/v1/sessions/..%2F..%2Fsecret.jsonl/dispose", 404, "NoSuchSession"},
		{"GET", "/v1/sessions/s1/approvals/..", 400, "InvalidArgument"},
		{"POST", "/v1/sessions/s1/approvals/%2e%2e", 400, "InvalidArgument"},
	} {
		req, err := http.NewRequest(c.method, a.http.URL+"/", nil)
		require.NoError(t, err)
		req.URL.Opaque = c.path // sent as written, not cleaned
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e httpapi.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), c.path)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s %s: %+v", c.method, c.path, e)
		require.Equal(t, c.typ, e.Error.Type, c.path)
	}
	require.Empty(t, fc.Calls(), "an update was sent for a refused path")
	require.Empty(t, spy.mutations, "the store changed something")
	for _, p := range spy.paths {
		require.True(t, p == root || strings.HasPrefix(p, root+string(filepath.Separator)), "the store reached %s, outside its root", p)
	}
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "secret\n", string(b))
}
