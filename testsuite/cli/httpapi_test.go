package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
)

// httpEnv is a worker --http with a scripted model that runs commands,
// driven over HTTP with net/http alone.
type httpEnv struct {
	*env
	base    string
	project string
}

// startHTTPWorker starts `worker --dev --http` with a scripted model whose
// answers are responses, in order.
func startHTTPWorker(t *testing.T, responses ...any) *httpEnv {
	e := newEnv(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	require.NoError(t, os.MkdirAll(project, 0o755))
	script, err := json.Marshal(map[string]any{"responses": responses})
	require.NoError(t, err)
	path := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(path, script, 0o644))
	port := freePort(t)
	e.workerArgs = []string{"--provider-script", path, "--enable-run-command", "--http", strconv.Itoa(port)}
	e.startWorker(true)
	return &httpEnv{env: e, base: fmt.Sprintf("http://127.0.0.1:%d", port), project: project}
}

// call sends a request (body encoded as JSON when not nil) and returns the
// status and the decoded JSON body.
func (h *httpEnv) call(method, path string, body any, token ...string) (int, map[string]any) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(h.ctx, method, h.base+path, rd)
	require.NoError(h.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+token[0])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	var v map[string]any
	require.NoError(h.t, json.Unmarshal(b, &v), "%s %s: %d %s", method, path, resp.StatusCode, b)
	return resp.StatusCode, v
}

// mustCall is call expecting 200.
func (h *httpEnv) mustCall(method, path string, body any) map[string]any {
	h.t.Helper()
	code, v := h.call(method, path, body)
	require.Equal(h.t, http.StatusOK, code, "%s %s: %v\n%s", method, path, v, h.logs())
	return v
}

// requireError expects a typed error.
func (h *httpEnv) requireError(status int, typ, method, path string, body any) map[string]any {
	h.t.Helper()
	code, v := h.call(method, path, body)
	require.Equal(h.t, status, code, "%s %s: %v", method, path, v)
	e := v["error"].(map[string]any)
	require.Equal(h.t, typ, e["type"], "%s %s: %v", method, path, v)
	require.NotEmpty(h.t, e["message"])
	return e
}

// sseEvent is one event of a stream.
type sseEvent struct {
	id    int64
	event string
	data  string
}

// stream follows /events of a session as Server-Sent Events: its events
// come on the channel.
func (h *httpEnv) stream(id string, lastEventID string) (<-chan sseEvent, context.CancelFunc) {
	h.t.Helper()
	return h.streamPath("/v1/sessions/"+id+"/events", "Last-Event-ID", lastEventID)
}

// streamPath reads the Server-Sent Events of path (sent with header, name
// value pairs, those with a value): its events come on the channel.
func (h *httpEnv) streamPath(path string, header ...string) (<-chan sseEvent, context.CancelFunc) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
	require.Equal(h.t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseEvent, 4096)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" {
					ch <- cur
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				cur.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				cur.data = line[6:]
			}
		}
	}()
	return ch, cancel
}

// until reads events from ch until one of type typ, and returns them all.
func (h *httpEnv) until(ch <-chan sseEvent, typ string) []session.Event {
	h.t.Helper()
	var out []session.Event
	timeout := time.After(90 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			require.True(h.t, ok, "the stream ended before a %s event", typ)
			require.Equal(h.t, "event", e.event, "%s", e.data)
			var ev session.Event
			require.NoError(h.t, ev.UnmarshalJSON([]byte(e.data)))
			require.Equal(h.t, e.id, ev.Seq, "the SSE id is the event's seq")
			out = append(out, ev)
			if ev.Type == typ {
				return out
			}
		case <-timeout:
			h.t.Fatalf("no %s event within 90s; got %d events\n%s", typ, len(out), h.logs())
		}
	}
}

// pendingApproval waits until the session lists an approval, and returns
// it.
func (h *httpEnv) pendingApproval(id string) map[string]any {
	h.t.Helper()
	var approvals []any
	require.Eventually(h.t, func() bool {
		v := h.mustCall("GET", "/v1/sessions/"+id+"/approvals", nil)
		approvals = v["approvals"].([]any)
		return len(approvals) > 0
	}, 90*time.Second, 50*time.Millisecond, "no approval was asked\n%s", h.logs())
	require.Len(h.t, approvals, 1)
	return approvals[0].(map[string]any)
}

// A person drives a session over HTTP alone: the session (created with
// starter) is listed live; a prompt is sent and its turn followed as
// Server-Sent Events until turn/end; a run_command call waits for
// approval, is listed, and runs once allowed (a permissions change while
// it waits is TurnRunning, a second decision ApprovalSettled); a turn
// waiting for approval is cancelled (its approval is settled cancelled);
// the stream resumes with Last-Event-ID; the session is disposed. What
// the stream carried is exactly what the store holds.
func TestSessionOverHTTP(t *testing.T) {
	h := startHTTPWorker(t,
		answer("Hello over HTTP."),
		runCommand("c1", "echo approved > approved.txt"), answer("Wrote it."),
		runCommand("c2", "echo never > never.txt"),
	)
	h.mustStarter("", "create", "--id", "web1", "--cwd", h.project, "--provider", "scripted", "--model", "m1", "--approval-policy", "ask")

	// Listed, live.
	require.Eventually(t, func() bool {
		v := h.mustCall("GET", "/v1/sessions", nil)
		for _, s := range v["sessions"].([]any) {
			s := s.(map[string]any)
			if s["id"] == "web1" {
				return s["state"] == "live" && s["cwd"] == h.project && s["workflowId"] == "session/web1" && s["runId"] != ""
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "web1 is not listed live")
	v := h.mustCall("GET", "/v1/sessions/web1", nil)
	require.Equal(t, "live", v["state"])
	require.Equal(t, "idle", v["loop"].(map[string]any)["state"])

	events, stop := h.stream("web1", "")
	defer stop()

	// A prompt; its turn followed to its end.
	v = h.mustCall("POST", "/v1/sessions/web1/messages", map[string]any{"text": "Say hello.", "messageId": "m-1"})
	require.Equal(t, "m-1", v["messageId"])
	got := h.until(events, "turn/end")
	var texts []string
	for _, ev := range got {
		if ev.Type == "assistant/message" {
			texts = append(texts, string(ev.Data))
		}
	}
	require.Len(t, texts, 1)
	require.Contains(t, texts[0], "Hello over HTTP.")
	v = h.mustCall("GET", "/v1/sessions/web1", nil)
	require.Equal(t, "scripted", v["provider"])
	require.Equal(t, "m1", v["model"])
	require.Equal(t, float64(1), v["turns"])

	// An approval: listed, allowed, run.
	h.mustCall("POST", "/v1/sessions/web1/messages", map[string]any{"text": "Write approved.txt."})
	ap := h.pendingApproval("web1")
	require.Equal(t, "c1", ap["callId"])
	require.Equal(t, "run_command", ap["tool"])
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(ap["arguments"].(string)), &args))
	require.Equal(t, map[string]string{"command": "echo approved > approved.txt"}, args)
	_, err := os.Stat(filepath.Join(h.project, "approved.txt"))
	require.True(t, os.IsNotExist(err), "the command ran before it was approved")
	h.requireError(http.StatusConflict, "TurnRunning", "POST", "/v1/sessions/web1/permissions", map[string]any{"approvalPolicy": "never"})
	v = h.mustCall("POST", "/v1/sessions/web1/approvals/"+ap["id"].(string), map[string]any{"outcome": "allowed-once"})
	require.Equal(t, map[string]any{"id": ap["id"], "callId": "c1", "outcome": "allowed-once"}, v)
	got = append(got, h.until(events, "turn/end")...)
	b, err := os.ReadFile(filepath.Join(h.project, "approved.txt"))
	require.NoError(t, err)
	require.Equal(t, "approved\n", string(b))
	e := h.requireError(http.StatusConflict, "ApprovalSettled", "POST", "/v1/sessions/web1/approvals/"+ap["id"].(string), map[string]any{"outcome": "rejected"})
	require.Equal(t, map[string]any{"outcome": "allowed-once"}, e["details"])
	h.requireError(http.StatusNotFound, "NoSuchApproval", "POST", "/v1/sessions/web1/approvals/no-such-approval", map[string]any{"outcome": "rejected"})

	// A turn waiting for approval is cancelled: the call never runs.
	h.mustCall("POST", "/v1/sessions/web1/messages", map[string]any{"text": "Write never.txt."})
	ap2 := h.pendingApproval("web1")
	require.Equal(t, "c2", ap2["callId"])
	v = h.mustCall("POST", "/v1/sessions/web1/cancel", map[string]any{})
	require.Equal(t, true, v["cancelled"])
	got = append(got, h.until(events, "turn/end")...)
	end := got[len(got)-1]
	te, err := end.TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "aborted", te.Reason.Kind)
	e = h.requireError(http.StatusConflict, "ApprovalSettled", "POST", "/v1/sessions/web1/approvals/"+ap2["id"].(string), map[string]any{"outcome": "allowed-once"})
	require.Equal(t, map[string]any{"outcome": "cancelled"}, e["details"])
	_, err = os.Stat(filepath.Join(h.project, "never.txt"))
	require.True(t, os.IsNotExist(err), "a cancelled call ran")

	// What the stream carried is the stored log, in order.
	stored := h.stored("web1")
	require.Len(t, got, len(stored))
	for i := range stored {
		want, err := stored[i].MarshalJSON()
		require.NoError(t, err)
		have, err := got[i].MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(have), "event %d", i)
	}
	stop()

	// A reconnect resumes after the Last-Event-ID.
	resumed, stop2 := h.stream("web1", strconv.FormatInt(stored[len(stored)-3].Seq, 10))
	tail := h.until(resumed, "turn/end")
	stop2()
	require.Equal(t, stored[len(stored)-2:], tail)

	// Errors of a client that guessed wrong.
	h.requireError(http.StatusNotFound, "NoSuchSession", "GET", "/v1/sessions/nope", nil)
	h.requireError(http.StatusNotFound, "NoSuchSession", "POST", "/v1/sessions/nope/messages", map[string]any{"text": "hi"})
	h.requireError(http.StatusBadRequest, "InvalidArgument", "POST", "/v1/sessions/web1/messages", map[string]any{"text": "hi", "mode": "yell"})

	// Dispose: the session is stored, no longer live; updates are refused.
	v = h.mustCall("POST", "/v1/sessions/web1/dispose", nil)
	require.Equal(t, float64(len(stored)), v["nextSeq"])
	v = h.mustCall("GET", "/v1/sessions/web1", nil)
	require.Equal(t, "stored", v["state"])
	require.Nil(t, v["loop"])
	code, v := h.call("POST", "/v1/sessions/web1/messages", map[string]any{"text": "still there?"})
	require.Equal(t, http.StatusConflict, code, "%v", v)
}

// starter serve serves the same API from any process that sees the
// root; on a non-loopback address it needs its token: a request without
// it, or with another, is 401.
func TestStarterServeNeedsItsTokenOffLoopback(t *testing.T) {
	h := startHTTPWorker(t, answer("Hi."))
	h.mustStarter("", "create", "--id", "tok1", "--cwd", h.project, "--provider", "scripted", "--model", "m1")

	port := freePort(t)
	args := []string{"serve", "--http", fmt.Sprintf("0.0.0.0:%d", port), "--root", h.root,
		"--address", fmt.Sprintf("127.0.0.1:%d", h.port), "--namespace", h.namespace, "--task-queue", h.taskQueue}
	_, err := h.starter("", args...)
	require.Error(t, err, "serve on 0.0.0.0 without a token")
	require.Contains(t, err.Error(), "a bearer token is required to listen on an address that is not loopback")

	cmd := exec.CommandContext(h.ctx, bin.starter, args...)
	cmd.Env = append(os.Environ(), "SESSIONFLOW_HTTP_TOKEN=let-me-in")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "serving the session API of ") }, 30*time.Second, 50*time.Millisecond, "%s", out)
	srv := &httpEnv{env: h.env, base: fmt.Sprintf("http://127.0.0.1:%d", port)}

	for _, token := range [][]string{nil, {"wrong"}, {""}} {
		code, v := srv.call("GET", "/v1/sessions", nil, token...)
		require.Equal(t, http.StatusUnauthorized, code, "token %q", token)
		require.Equal(t, "Unauthorized", v["error"].(map[string]any)["type"])
	}
	code, v := srv.call("GET", "/v1/sessions/tok1", nil, "let-me-in")
	require.Equal(t, http.StatusOK, code, "%v", v)
	require.Equal(t, "live", v["state"])
	code, v = srv.call("POST", "/v1/sessions/tok1/messages", map[string]any{"text": "Hello?", "wait": true}, "let-me-in")
	require.Equal(t, http.StatusOK, code, "%v", v)
	require.Equal(t, "completed", v["ended"].(map[string]any)["reason"].(map[string]any)["kind"])

	// SIGTERM stops it cleanly.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "%s", out)
		exited <- nil
	case <-time.After(30 * time.Second):
		t.Fatalf("starter serve did not stop on SIGTERM\n%s", out)
	}
}
