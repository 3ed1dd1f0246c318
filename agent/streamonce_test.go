package agent_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
)

// largeAnswer is a response of about 96 KiB of text in 2000 deltas, each
// holding a marker found nowhere else ("M-<i>;"), a tool call whose
// arguments hold "ARGS-MARKER", usage and a max-tokens finish (which a
// reader cannot guess from the content: it is read from the stream).
func largeAnswer() (response, string) {
	r := response{chunks: []provider.Chunk{reasoning("REASONING-MARKER ")}}
	var all strings.Builder
	for i := range 2000 {
		d := fmt.Sprintf("M-%04d; %s\n", i, strings.Repeat("x", 40))
		all.WriteString(d)
		r.chunks = append(r.chunks, text(d))
	}
	r.chunks = append(r.chunks, callChunk(0, "call-1", "echo", `{"text":"ARGS-MARKER"}`),
		usage(1234, 5678), finish(provider.FinishMaxTokens))
	return r, all.String()
}

// storedLine is the stored JSONL line of e.
func storedLine(t *testing.T, e session.Event) string {
	t.Helper()
	line, err := e.MarshalJSON()
	require.NoError(t, err)
	return string(line)
}

// TestCallModelStoresALargeAnswersTextOnce: the assistant/message of an
// answer whose text is past agent.StreamTextLimit holds each piece of its
// text once (before, its stream record repeated every delta beside the
// content: the event was twice the answer); its finish reason and usage
// still read back when the call is retried, and the next step's request
// carries the text once.
func TestCallModelStoresALargeAnswersTextOnce(t *testing.T) {
	r, all := largeAnswer()
	require.Greater(t, len(all), agent.StreamTextLimit)
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), r, answer("done"))
	first, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, provider.FinishMaxTokens, first.Finish)
	require.Equal(t, &provider.Usage{InputTokens: 1234, OutputTokens: 5678}, first.Usage)

	log := f.log()
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "assistant/message"}, types(log))
	line := storedLine(t, log[3])
	for _, marker := range []string{"M-0000;", "M-0999;", "M-1999;", "REASONING-MARKER", "ARGS-MARKER"} {
		require.Equal(t, 1, strings.Count(line, marker), "%q in the stored line of %d bytes", marker, len(line))
	}
	esc, err := json.Marshal(all)
	require.NoError(t, err)
	require.Less(t, len(line), len(esc)+2048, "the stored line is about the answer's size")
	d := dataOf(t, log[3])
	msg := d["message"].(map[string]any)
	content := msg["content"].([]any)
	require.Len(t, content, 3)
	require.True(t, content[1].(map[string]any)["text"] == all, "the content holds the whole text")
	stream, err := json.Marshal(d["stream"])
	require.NoError(t, err)
	require.JSONEq(t, `[{"type":"chunk","time":0,"chunk":{"type":"usage","usage":{"inputTokens":1234,"outputTokens":5678}}},{"type":"chunk","time":0,"chunk":{"type":"finish","finish":"max-tokens"}}]`,
		zeroTimes(t, stream), "the stream record keeps the usage and finish chunks")
	require.Equal(t, map[string]any{"inputTokens": 1234.0, "outputTokens": 5678.0}, d["usage"])
	require.NoError(t, session.CheckAppendable(session.Header{Version: session.FormatVersion}, 3, log[3:]))

	// A retry, here or on another worker, reuses the stored message with
	// its finish reason and usage.
	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.callModel(acts, f.modelInput(1, 1))
		require.NoError(t, err)
		require.True(t, again.Reused)
		again.Reused = false
		require.Equal(t, first, again)
	}
	require.Equal(t, 1, f.prov.calls())

	// The next step's request carries the text once.
	f.append(ev(t, session.TypeStepStart, 4, `{"turn":1,"step":2}`))
	_, err = f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	require.Equal(t, 2, f.prov.calls())
	req, err := json.Marshal(f.prov.requests[1].Messages)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(req), "M-1234;"), "the next request holds the text once")
	require.Less(t, len(req), len(esc)+2048)
}

// zeroTimes returns the stream records with their times set to 0.
func zeroTimes(t *testing.T, stream []byte) string {
	t.Helper()
	var recs []map[string]any
	require.NoError(t, json.Unmarshal(stream, &recs))
	for _, r := range recs {
		if _, ok := r["time"]; ok {
			r["time"] = 0
		}
	}
	out, err := json.Marshal(recs)
	require.NoError(t, err)
	return string(out)
}

// TestCallModelKeepsAShortAnswersStream: an answer within
// agent.StreamTextLimit keeps its whole stream record, which replays to
// the stored content.
func TestCallModelKeepsAShortAnswersStream(t *testing.T) {
	r := response{chunks: []provider.Chunk{reasoning("th"), reasoning("ink"), text("Hel"), text("lo"),
		callChunk(0, "call-1", "echo", `{"te`), callChunk(0, "", "", `xt":"a"}`), usage(3, 4), finish(provider.FinishToolCalls)}}
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), r)
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m, err := f.log()[3].AssistantMessage()
	require.NoError(t, err)
	var recs []json.RawMessage
	require.NoError(t, json.Unmarshal(m.Stream, &recs))
	chunks, err := provider.ReplayStream(recs)
	require.NoError(t, err)
	require.Equal(t, r.chunks, chunks, "the stream record replays the whole stream")
	a := provider.NewAssembler()
	for _, c := range chunks {
		require.NoError(t, a.Push(c, 1))
	}
	content, err := json.Marshal(a.Content())
	require.NoError(t, err)
	stored, err := json.Marshal(m.Message.Content)
	require.NoError(t, err)
	require.JSONEq(t, string(stored), string(content))
}

// TestCallModelReadsAnOldLargeMessage: a message stored before the text
// was stored once (its stream record repeats every delta) is still reused
// with the finish reason of its stream, and sent once in the next request.
func TestCallModelReadsAnOldLargeMessage(t *testing.T) {
	r, all := largeAnswer()
	old := provider.NewAssembler() // no limit: the old writer's record
	for i, c := range r.chunks {
		require.NoError(t, old.Push(c, int64(1000+i)))
	}
	require.False(t, old.StreamElided())
	data, err := session.MarshalData(map[string]any{
		"turn": 1, "step": 1,
		"message": map[string]any{"id": "assistant-1-1", "role": "assistant", "content": old.Content(),
			"source": map[string]any{"provider": "fake", "model": "m1"}},
		"stream": old.Stream(), "usage": old.Usage(),
	})
	require.NoError(t, err)
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), answer("unused"), answer("done"))
	e, err := session.NewEvent(session.TypeAssistantMessage, 3, 2000, data)
	require.NoError(t, err)
	e.SurfaceOp = session.AppendOp()
	f.append(e)
	require.Equal(t, 2, strings.Count(storedLine(t, f.log()[3]), "M-0500;"), "the old record repeats the text")

	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.True(t, res.Reused)
	require.Equal(t, provider.FinishMaxTokens, res.Finish)
	require.Equal(t, &provider.Usage{InputTokens: 1234, OutputTokens: 5678}, res.Usage)
	require.Equal(t, []agent.CallRef{{ID: "call-1", Name: "echo"}}, res.ToolCalls)
	require.Equal(t, 0, f.prov.calls())

	f.append(ev(t, session.TypeStepStart, 4, `{"turn":1,"step":2}`))
	_, err = f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	req, err := json.Marshal(f.prov.requests[0].Messages)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(req), "M-0500;"))
	sent := f.prov.requests[0].Messages[1].Content
	require.Len(t, sent, 3)
	require.True(t, sent[1].Text == all, "the next request carries the whole text")
}

// TestCallModelLargeInterruptedAnchorHoldsItsTextOnce: the anchor of a
// cancelled call that had shown more than agent.StreamTextLimit holds the
// shown text once.
func TestCallModelLargeInterruptedAnchorHoldsItsTextOnce(t *testing.T) {
	r, _ := largeAnswer()
	shown := r.chunks[:1500] // reasoning and 1499 text deltas
	f := newFixture(t, nil, response{chunks: shown, stall: true})
	require.Error(t, cancelAfter(t, f, len(shown), temporal.NewCanceledError()))
	log := f.log()
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "assistant/message"}, types(log))
	line := storedLine(t, log[3])
	for _, marker := range []string{"M-0000;", "M-1498;", "REASONING-MARKER"} {
		require.Equal(t, 1, strings.Count(line, marker), "%q in the anchor's line", marker)
	}
	d := dataOf(t, log[3])
	require.Equal(t, true, d["interrupted"])
	require.Equal(t, []any{}, d["stream"])
}
