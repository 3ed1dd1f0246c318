package cli

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The running model call's text reaches an HTTP client through
// /v1/sessions/{id}/live, from the live file the worker's model activity
// writes beside the log: its chunks make the answer, and the end event
// comes once the message is stored, which /events then serves.
func TestLiveTextOverHTTP(t *testing.T) {
	// Four chunks, 100 ms apart: the live file lives long enough for the
	// follower to open it however loaded the machine; a call that streams
	// all at once may come and go between two reads of the directory, and
	// its message is then only on /events.
	h := startHTTPWorker(t, map[string]any{"text": "Streamed over HTTP.", "chunkSize": 5, "delayMs": 100})
	h.mustStarter("", "create", "--id", "live1", "--cwd", h.project, "--provider", "scripted", "--model", "m1")
	live, stop := h.streamPath("/v1/sessions/live1/live")
	defer stop()
	h.mustCall("POST", "/v1/sessions/live1/messages", map[string]any{"text": "Stream something."})
	text := ""
	timeout := time.After(90 * time.Second)
	for done := false; !done; {
		select {
		case e, ok := <-live:
			require.True(t, ok, "the live stream ended")
			var d struct {
				Turn, Step, Offset int64
				Attempt            int32
				Text, Kind         string
			}
			require.NoError(t, json.Unmarshal([]byte(e.data), &d), e.data)
			require.Equal(t, int64(1), d.Turn)
			require.Equal(t, int64(1), d.Step)
			switch e.event {
			case "chunk":
				require.Equal(t, "text", d.Kind)
				require.Equal(t, int64(len(text)), d.Offset, "chunks follow each other")
				text += d.Text
			case "end":
				done = true
			default:
				t.Fatalf("unexpected live event %s %s", e.event, e.data)
			}
		case <-timeout:
			t.Fatalf("no live end within 90s; text so far %q\n%s", text, h.logs())
		}
	}
	require.Equal(t, "Streamed over HTTP.", text)
	events, stop2 := h.stream("live1", "")
	defer stop2()
	got := h.until(events, "assistant/message")
	require.Contains(t, string(got[len(got)-1].Data), "Streamed over HTTP.")
	code, v := h.call("GET", "/v1/sessions/nope/live", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "NoSuchSession", v["error"].(map[string]any)["type"])
}
